"""Per-session timelines: the frames detectors read (DESIGN.md §2, `analyzer.schema`).

Every stage is a `LazyFrame -> LazyFrame` function (`keys`, `streams`, `exchanges`,
`resumptions`, `tool_calls`, `sessions`). `build_timeline` chains them over the normalized
tables; it collects once, at this edge, the flow-level spine every frame shares (session keys,
cursor resolution, the flow → stream map) and the small frames (streams, incarnations,
resumptions, tool_calls, sessions), so detectors that each collect a frame do not redo them.
`exchanges` (wide), `sse_events` and `messages` stay lazy scans of the Parquet tables joined to
that spine: a detector reads only the columns and rows it asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

import polars as pl

from analyzer import schema as S
from analyzer.ingest import Ingested, InputReport, read_inputs
from analyzer.normalize import NormalizedFrames
from analyzer.timeline.exchanges import exchanges, messages, sse_events
from analyzer.timeline.keys import KEY_COLUMNS, key_flows
from analyzer.timeline.resumptions import resumptions
from analyzer.timeline.sessions import sessions
from analyzer.timeline.streams import (
    delivered_responses,
    incarnations,
    issued_cursors,
    resolve_cursors,
    stream_map,
    streams,
)
from analyzer.timeline.tool_calls import RPC_COLUMNS, RPC_ROWS, tool_calls

__all__ = ["RawTables", "Timeline", "build_timeline", "load_timeline", "payloads_of"]

# The flow columns the stages after `key_flows` read (all of them but `exchanges`).
_SPINE = [
    "flow_id",
    *KEY_COLUMNS,
    "req_seq",
    "method",
    "authority",
    "path",
    "client_ip",
    "client_value",
    "last_event_id",
    "mcp_session_id",
    "rpc_id",
    "rpc_method",
    "initialize",
    "rpc_client_info",
    "resp_ts",
    "status",
    "replica",
    "end_ts",
    "end_how",
    "events",
    "payload_events",
    "first_cursor",
    "last_cursor",
    "last_retry_ms",
]

# Engines for the collects at this edge: the streaming engine for the scans of the Parquet
# tables (memory does not grow with them), the in-memory one for plans over the collected
# flow-level spine (a fraction of the rows: its lower per-operator cost wins there).
_BIG: Final = "streaming"
_SMALL: Final = "in-memory"


@dataclass(frozen=True)
class RawTables:
    """The normalized tables as lazy frames (flows carry the `input` column).

    `payload_rows`: the payload parts as stored, where one text may recur across parts (its
    hash, its text); `payloads` is the same deduplicated. Selecting rows of `payload_rows` and
    deduplicating those is far cheaper than deduplicating every payload first.
    """

    flows: pl.LazyFrame
    events: pl.LazyFrame
    messages: pl.LazyFrame
    tools: pl.LazyFrame
    payloads: pl.LazyFrame
    payload_rows: pl.LazyFrame | None = None

    @staticmethod
    def from_ingested(ingested: Ingested) -> RawTables:
        parts = [
            sorted(directory.glob("payloads-*.parquet"))
            for directory in ingested.directories
            if directory is not None
        ]
        files = [f for group in parts for f in group]
        return RawTables(
            flows=ingested.scan("flows"),
            events=ingested.scan("events"),
            messages=ingested.scan("messages"),
            tools=ingested.scan("tools"),
            payloads=ingested.scan("payloads"),
            payload_rows=pl.scan_parquet(files, schema=S.PAYLOADS) if files else None,
        )

    @staticmethod
    def from_frames(frames: NormalizedFrames, input_index: int = 0) -> RawTables:
        """In-memory tables (tests, small inputs)."""
        return RawTables(
            flows=frames.flows.lazy().with_columns(pl.lit(input_index, pl.Int32).alias("input")),
            events=frames.events.lazy(),
            messages=frames.messages.lazy(),
            tools=frames.tools.lazy(),
            payloads=frames.payloads.lazy(),
        )


@dataclass(frozen=True)
class Timeline:
    """What detectors take: the timeline frames, the payload texts, the inputs' reports."""

    exchanges: pl.LazyFrame
    sse_events: pl.LazyFrame
    messages: pl.LazyFrame
    streams: pl.LazyFrame
    incarnations: pl.LazyFrame
    resumptions: pl.LazyFrame
    tool_calls: pl.LazyFrame
    sessions: pl.LazyFrame
    payloads: pl.LazyFrame
    inputs: tuple[InputReport, ...] = ()
    payload_rows: pl.LazyFrame | None = None  # `RawTables.payload_rows`

    def frames(self) -> dict[str, pl.LazyFrame]:
        """The frames by name (the keys of `analyzer.schema.TIMELINE_FRAMES`)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("inputs", "payload_rows")
        }

    def payload_text(self, data_hashes: Sequence[str]) -> dict[str, str]:
        """The text of these payloads (base64 for binary bodies)."""
        found = self.payloads.filter(pl.col("data_hash").is_in(list(data_hashes))).collect()
        return dict(zip(found["data_hash"].to_list(), found["text"].to_list(), strict=True))


def payloads_of(
    timeline: Timeline, hashes: pl.LazyFrame, *parsed: pl.Expr, text: bool = True
) -> pl.LazyFrame:
    """The `payloads` rows (one per hash) of the `data_hash` values in `hashes`.

    Selects the stored rows before deduplicating them: joining `timeline.payloads` itself
    deduplicates every payload of the capture first. (A stand-in timeline without
    `payload_rows`, as tests build, gets the join on `payloads`.)

    `parsed`: columns computed from the text as the rows are read, before deduplication;
    with `text=False` the text itself is dropped there. A caller that needs a few fields of
    many payloads should ask for them so: a selected text keeps the whole buffer it was read
    in alive until deduplication, where a parsed field is a small string of its own.
    """
    keys = hashes.select("data_hash")
    rows: pl.LazyFrame | None = getattr(timeline, "payload_rows", None)
    kept = ["data_hash", "base64", *(["text"] if text else [])]
    if rows is None:
        return timeline.payloads.join(keys, on="data_hash", how="semi").select(*kept, *parsed)
    return (
        rows.join(keys, on="data_hash", how="semi")
        .select(*kept, *parsed)
        .unique("data_hash", keep="any")
    )


def build_timeline(
    raw: RawTables, inputs: Sequence[InputReport] = (), *, materialize: bool = True
) -> Timeline:
    """Chain the stages over the normalized tables.

    With `materialize` (the default) the flow-level spine is collected here once; without,
    every frame is a pure lazy plan (each collect recomputes the spine: fine for tests).
    """
    keyed = raw.flows.pipe(key_flows)
    wide = keyed
    if materialize:
        # Every stage but `exchanges` reads a few columns of the flows: keep those in memory,
        # and let `exchanges` take the rest from the Parquet scan when it is collected.
        keyed = keyed.select(_SPINE).collect(engine=_BIG).lazy()
        wide = raw.flows.join(keyed.select("flow_id", *KEY_COLUMNS), on="flow_id", how="left")
    if materialize:
        sent = keyed.select(pl.col("last_event_id").drop_nulls().unique()).collect(engine=_SMALL)
        issued = issued_cursors(raw.events, keyed, sent.to_series()).collect(engine=_BIG).lazy()
    else:
        issued = issued_cursors(raw.events, keyed)
    resolved = resolve_cursors(keyed, issued)
    if materialize:
        resolved = resolved.collect(engine=_SMALL).lazy()
    placed = stream_map(keyed, resolved)
    if materialize:
        placed = placed.collect(engine=_SMALL).lazy()
    message_frame = raw.messages.pipe(messages, keyed=keyed, streams_of_flows=placed)
    # The few message rows the flow-level frames read (requests, responses): one scan.
    rpc_messages = message_frame.filter(RPC_ROWS).select(RPC_COLUMNS)
    if materialize:
        rpc_messages = rpc_messages.collect(engine=_BIG).lazy()
    delivered = delivered_responses(placed, keyed, rpc_messages)
    if materialize:
        delivered = delivered.collect(engine=_SMALL).lazy()
    timeline = Timeline(
        exchanges=wide.pipe(exchanges, streams_of_flows=placed),
        sse_events=raw.events.pipe(sse_events, keyed=keyed, streams_of_flows=placed),
        messages=message_frame,
        streams=placed.pipe(streams, keyed=keyed, delivered=delivered),
        incarnations=placed.pipe(incarnations, keyed=keyed, delivered=delivered),
        resumptions=resolved.pipe(
            resumptions, keyed=keyed, streams_of_flows=placed, delivered=delivered
        ),
        tool_calls=rpc_messages.pipe(
            tool_calls, keyed=keyed, streams_of_flows=placed, tools=raw.tools
        ),
        sessions=keyed.pipe(sessions, streams_of_flows=placed),
        payloads=raw.payloads,
        inputs=tuple(inputs),
        payload_rows=raw.payload_rows,
    )
    if materialize:
        # Collected together (shared subplans once); `exchanges` stays a scan (it is wide, and
        # detectors read a few of its columns).
        small = ("streams", "incarnations", "resumptions", "tool_calls", "sessions")
        collected = pl.collect_all([getattr(timeline, name) for name in small], engine=_SMALL)
        timeline = Timeline(
            **{
                **timeline.frames(),
                **{name: df.lazy() for name, df in zip(small, collected, strict=True)},
            },
            inputs=timeline.inputs,
            payload_rows=timeline.payload_rows,
        )
    return timeline


def load_timeline(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    workers: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Timeline:
    """Read the inputs (through the Parquet cache) and build their timeline."""
    ingested = read_inputs(
        paths,
        replica_header=replica_header,
        client_header=client_header,
        cache=cache,
        workers=workers,
        on_progress=on_progress,
    )
    return build_timeline(RawTables.from_ingested(ingested), ingested.inputs)


def _check_schemas(timeline: Timeline) -> None:
    """Assert every frame's schema (used by tests)."""
    for name, frame in timeline.frames().items():
        try:
            S.assert_schema(frame, S.TIMELINE_FRAMES[name])
        except S.SchemaMismatch as e:
            raise S.SchemaMismatch(f"{name}: {e}") from None
