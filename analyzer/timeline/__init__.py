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

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

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
from analyzer.timeline.tool_calls import tool_calls

__all__ = ["RawTables", "Timeline", "build_timeline", "load_timeline"]

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


@dataclass(frozen=True)
class RawTables:
    """The normalized tables as lazy frames (flows carry the `input` column)."""

    flows: pl.LazyFrame
    events: pl.LazyFrame
    messages: pl.LazyFrame
    tools: pl.LazyFrame
    payloads: pl.LazyFrame

    @staticmethod
    def from_ingested(ingested: Ingested) -> RawTables:
        return RawTables(
            flows=ingested.scan("flows"),
            events=ingested.scan("events"),
            messages=ingested.scan("messages"),
            tools=ingested.scan("tools"),
            payloads=ingested.scan("payloads"),
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

    def frames(self) -> dict[str, pl.LazyFrame]:
        """The frames by name (the keys of `analyzer.schema.TIMELINE_FRAMES`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "inputs"}

    def payload_text(self, data_hashes: Sequence[str]) -> dict[str, str]:
        """The text of these payloads (base64 for binary bodies)."""
        found = self.payloads.filter(pl.col("data_hash").is_in(list(data_hashes))).collect()
        return dict(zip(found["data_hash"].to_list(), found["text"].to_list(), strict=True))


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
        keyed = keyed.select(_SPINE).collect().lazy()
        wide = raw.flows.join(keyed.select("flow_id", *KEY_COLUMNS), on="flow_id", how="left")
    if materialize:
        sent = keyed.select(pl.col("last_event_id").drop_nulls().unique()).collect()
        issued = issued_cursors(raw.events, keyed, sent.to_series()).collect().lazy()
    else:
        issued = issued_cursors(raw.events, keyed)
    resolved = resolve_cursors(keyed, issued)
    if materialize:
        resolved = resolved.collect().lazy()
    placed = stream_map(keyed, resolved)
    if materialize:
        placed = placed.collect().lazy()
    message_frame = raw.messages.pipe(messages, keyed=keyed, streams_of_flows=placed)
    delivered = delivered_responses(placed, keyed, message_frame)
    if materialize:
        delivered = delivered.collect().lazy()
    timeline = Timeline(
        exchanges=wide.pipe(exchanges, streams_of_flows=placed),
        sse_events=raw.events.pipe(sse_events, keyed=keyed, streams_of_flows=placed),
        messages=message_frame,
        streams=placed.pipe(streams, keyed=keyed, delivered=delivered),
        incarnations=placed.pipe(incarnations, keyed=keyed, delivered=delivered),
        resumptions=resolved.pipe(
            resumptions, keyed=keyed, streams_of_flows=placed, delivered=delivered
        ),
        tool_calls=message_frame.pipe(
            tool_calls, keyed=keyed, streams_of_flows=placed, tools=raw.tools
        ),
        sessions=keyed.pipe(sessions, streams_of_flows=placed),
        payloads=raw.payloads,
        inputs=tuple(inputs),
    )
    if materialize:
        # Collected together (shared subplans once); `exchanges` stays a scan (it is wide, and
        # detectors read a few of its columns).
        small = ("streams", "incarnations", "resumptions", "tool_calls", "sessions")
        collected = pl.collect_all([getattr(timeline, name) for name in small])
        timeline = Timeline(
            **{
                **timeline.frames(),
                **{name: df.lazy() for name, df in zip(small, collected, strict=True)},
            },
            inputs=timeline.inputs,
        )
    return timeline


def load_timeline(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    workers: int | None = None,
) -> Timeline:
    """Read the inputs (through the Parquet cache) and build their timeline."""
    ingested = read_inputs(
        paths,
        replica_header=replica_header,
        client_header=client_header,
        cache=cache,
        workers=workers,
    )
    return build_timeline(RawTables.from_ingested(ingested), ingested.inputs)


def _check_schemas(timeline: Timeline) -> None:
    """Assert every frame's schema (used by tests)."""
    for name, frame in timeline.frames().items():
        try:
            S.assert_schema(frame, S.TIMELINE_FRAMES[name])
        except S.SchemaMismatch as e:
            raise S.SchemaMismatch(f"{name}: {e}") from None
