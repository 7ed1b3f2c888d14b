"""Per-session timelines: the frames detectors read (DESIGN.md §2, `analyzer.schema`).

Every stage is a `LazyFrame -> LazyFrame` function (`keys`, `streams`, `exchanges`,
`resumptions`, `tool_calls`, `sessions`). `build_timeline` chains them over the normalized
tables; it collects once, at this edge, the flow-level spine every frame shares (session keys,
cursor resolution, the flow → stream map) and the small frames (streams, incarnations,
resumptions, tool_calls, sessions) and `exchanges` (one row per flow, read by most detectors), so
detectors that each collect a frame do not redo them. These are collected one at a time, and a
large one is kept in a temporary Parquet file rather than in memory (`_Spill`), as are the
message rows of requests, responses and cancellations (`rpc_messages`) and the events replay
judgements read and their messages (`recurring_events`, `resumed_events`, `replay_messages`:
`analyzer.timeline.replays`), the resumes placed at their cursor and what their streams carried
after it (`resumes_at_cursor`, `after_cursor`: `analyzer.timeline.cursors`), the progress those
streams made (`resumed_progress`) and how each incarnation's id counter moved (`id_counters`).
`sse_events` and `messages` stay lazy scans of the Parquet tables joined to the flows'
placement (collected once): a detector reads only the columns and rows it asks for.
`load_timeline` stores the collected frames in the cache and reads them back on a later
analysis of the same inputs (`analyzer.timeline.stored`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Final, Literal

import polars as pl

from analyzer import schema as S
from analyzer.ingest import Ingested, InputReport, read_inputs
from analyzer.normalize import NormalizedFrames
from analyzer.timeline import stored
from analyzer.timeline.answers import CANCELLATION, REQUEST, answered_requests
from analyzer.timeline.counters import id_counters
from analyzer.timeline.cursors import RESUME_COLUMNS, after_cursor, resumed_at_cursor
from analyzer.timeline.dating import dated, event_dates
from analyzer.timeline.exchanges import exchanges, messages, placement, sse_events
from analyzer.timeline.keys import KEY_COLUMNS, key_flows
from analyzer.timeline.replays import (
    recurring_events,
    recurring_keys,
    replay_messages,
    resumed_events,
    resumed_progress,
)
from analyzer.timeline.resumptions import resumptions
from analyzer.timeline.sessions import sessions
from analyzer.timeline.streams import (
    delivered_responses,
    incarnations,
    issued_cursors,
    own_issues,
    resolve_cursors,
    stream_map,
    streams,
)
from analyzer.timeline.tool_calls import RPC_COLUMNS, RPC_ROWS, tool_calls

__all__ = [
    "RPC_MESSAGE_COLUMNS",
    "RPC_MESSAGE_ROWS",
    "RawTables",
    "Timeline",
    "build_timeline",
    "load_timeline",
    "payloads_of",
]

RPC_MESSAGE_ROWS: Final = (
    RPC_ROWS
    | ((pl.col("direction") == "s2c") & pl.col("kind").is_in(["response", "error"]))
    | REQUEST
    | CANCELLATION
)
"""The MESSAGES rows of `Timeline.rpc_messages`: every request, response, error and
cancellation (a few in a hundred messages: most are notifications on event streams)."""

RPC_MESSAGE_COLUMNS: Final = (*RPC_COLUMNS, "source", "event_id", "payload_hash")
"""The MESSAGES columns of `Timeline.rpc_messages` (which adds `answers`:
`analyzer.timeline.answers`)."""

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
    "chunks",
]

# Engines for the collects at this edge: the streaming engine for the scans of the Parquet
# tables (memory does not grow with them), the in-memory one for plans over the collected
# flow-level spine (a fraction of the rows: its lower per-operator cost wins there).
_Engine = Literal["streaming", "in-memory"]
_BIG: Final[_Engine] = "streaming"
_SMALL: Final[_Engine] = "in-memory"


_SPILL_ROWS: Final = 50_000


class _Spill:
    """Where `build_timeline` keeps the frames it collected (`kept`, by name).

    Given a folder (`spill_dir`), a frame of `_SPILL_ROWS` rows or more goes to a Parquet file
    there and is scanned back: detectors read each such frame a few times, which costs less than
    holding every frame of a large capture in memory while they run (at 10M events the
    flow-level frames are a few hundred MB). Smaller frames, and every frame without a folder,
    stay in memory. The caller owns the folder: a plan read from the Timeline's frames needs it
    until that plan is collected for the last time. `engine`: the streaming one for a plan that
    scans a Parquet table (its memory does not grow with the table). Given a `stored.Writer`,
    every frame is written there too (what is kept does not depend on it).
    """

    def __init__(self, folder: Path | None, writer: stored.Writer | None = None) -> None:
        self._dir = folder
        self._writer = writer
        self.kept: stored.StoredFrames = {}

    def keep(
        self, name: str, plan: pl.LazyFrame, engine: _Engine = _SMALL, *, spill: bool = True
    ) -> pl.LazyFrame:
        frame = plan.collect(engine=engine)
        stored_file = self._writer.put(name, frame) if self._writer is not None else None
        kept = frame.lazy()
        if spill and self._dir is not None and frame.height >= _SPILL_ROWS:
            path = self._dir / f"{name}.parquet"
            # The stored file, linked or copied (the staging folder goes at commit); else written.
            if stored_file is None or not stored.link_or_copy(stored_file, path):
                frame.write_parquet(path, compression=stored.COMPRESSION, statistics=False)
            kept = pl.scan_parquet(path)
        self.kept[name] = kept
        return kept

    def sink(self, name: str, plan: pl.LazyFrame) -> pl.LazyFrame:
        """`keep` for a plan over the record-level scans: written by the streaming engine straight
        to the folder's Parquet file, its rows never all in memory (collected as `keep` does
        without a folder, or when the file cannot be written)."""
        if self._dir is None:
            return self.keep(name, plan, _BIG)
        path = self._dir / f"{name}.parquet"
        try:
            plan.sink_parquet(path, compression=stored.COMPRESSION, statistics=False)
        except (OSError, pl.exceptions.PolarsError):  # no room in the folder: held in memory
            path.unlink(missing_ok=True)
            return self.keep(name, plan, _BIG, spill=False)
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        if self._writer is not None:
            self._writer.put_file(name, path, rows)
        kept = pl.scan_parquet(path) if rows >= _SPILL_ROWS else pl.read_parquet(path).lazy()
        self.kept[name] = kept
        return kept


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

    def redated(self, dates: pl.LazyFrame | None) -> RawTables:
        """The tables with the events and messages of inputs without per-event times dated
        (`analyzer.timeline.dating`; `dates`: `event_dates` output, None or empty: as they are).
        """
        if dates is None or dates.select(pl.len()).collect().item() == 0:
            return self
        return replace(self, events=dated(self.events, dates), messages=dated(self.messages, dates))

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


# Timeline fields that are not frames of `analyzer.schema.TIMELINE_FRAMES` (the derived ones are
# subsets of those frames).
_NOT_FRAMES: Final = frozenset(
    {
        "inputs",
        "payload_rows",
        "rpc_messages",
        "recurring_events",
        "resumed_events",
        "replay_messages",
        "id_counters",
        "resumes_at_cursor",
        "after_cursor",
        "resumed_progress",
    }
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
    # The `messages` rows `RPC_MESSAGE_ROWS` (requests, responses, errors, cancellations: a few
    # in a hundred messages), columns `RPC_MESSAGE_COLUMNS`, collected once by `build_timeline`:
    # a detector that judges requests and their answers reads them here instead of scanning
    # every message again.
    rpc_messages: pl.LazyFrame
    # The `sse_events` rows whose id recurs in their session (`RECURRING_EVENT_COLUMNS`) and
    # those of the streams a resume continued (`RESUMED_EVENT_COLUMNS`): about one event in a
    # hundred and one in ten, all that replay judgements read, selected once by
    # `build_timeline` instead of by a pass over every event in each detector
    # (`analyzer.timeline.replays`).
    recurring_events: pl.LazyFrame
    resumed_events: pl.LazyFrame
    # The `messages` rows (columns `REPLAY_MESSAGE_COLUMNS`) those events carried.
    replay_messages: pl.LazyFrame
    # Per stream, incarnation and id prefix, how the event-id counter moved
    # (`analyzer.timeline.counters`): one pass over every id, made once by `build_timeline`.
    id_counters: pl.LazyFrame
    # The resumes that became an incarnation of their own stream, placed at their cursor, and
    # what their streams carried after it (`analyzer.timeline.cursors`): read by the detectors
    # judging replays, placed once by `build_timeline`.
    resumes_at_cursor: pl.LazyFrame
    after_cursor: pl.LazyFrame
    # The progress notifications on the resumed streams, each at its position, in order of
    # stream, token and position (`analyzer.timeline.replays.resumed_progress`).
    resumed_progress: pl.LazyFrame
    inputs: tuple[InputReport, ...] = ()
    payload_rows: pl.LazyFrame | None = None  # `RawTables.payload_rows`

    def frames(self) -> dict[str, pl.LazyFrame]:
        """The frames by name (the keys of `analyzer.schema.TIMELINE_FRAMES`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_FRAMES}

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
    raw: RawTables,
    inputs: Sequence[InputReport] = (),
    *,
    materialize: bool = True,
    spill_dir: Path | None = None,
    writer: stored.Writer | None = None,
) -> Timeline:
    """Chain the stages over the normalized tables.

    With `materialize` (the default) the flow-level spine is collected here once; without,
    every frame is a pure lazy plan (each collect recomputes the spine: fine for tests).
    `spill_dir`: a folder, kept by the caller while the Timeline is read, where large collected
    frames wait as Parquet files instead of in memory (`_Spill`). `writer`: where the collected
    frames are stored for later analyses of the same inputs (`analyzer.timeline.stored`; the
    caller commits it).
    """
    keyed = raw.flows.pipe(key_flows)
    if not materialize:
        return _timeline(raw, inputs, keyed)
    spill = _Spill(spill_dir, writer)
    # Every stage but `exchanges` reads a few columns of the flows: keep those in memory,
    # and let `exchanges` take the rest from the Parquet scan when it is collected.
    spine = keyed.select(_SPINE).collect(engine=_BIG)
    keyed = spine.lazy()
    # Events of inputs without per-event times, dated before anything reads their times.
    raw = raw.redated(spill.keep("event_dates", event_dates(raw.events, raw.messages, keyed)))
    sent = spine.select(pl.col("last_event_id").drop_nulls().unique())
    # Each cursor's issues in its own session, read from the events; those in other sessions
    # only when some cursor has none there (read again, only those of such cursors).
    issued = issued_cursors(raw.events, keyed, sent.to_series())
    own = own_issues(keyed, issued).collect(engine=_BIG)
    if own["c_flow_id"].null_count() == 0:
        issued = issued.clear()
    resolved = resolve_cursors(own.lazy(), issued).collect(engine=_SMALL).lazy()
    placed = stream_map(keyed, resolved).collect(engine=_SMALL).lazy()
    # What `sse_events` and `messages` join to every record, and `exchanges` to every flow.
    on_flows = spill.keep("placement", placement(keyed, placed), spill=False)
    message_frame = raw.messages.pipe(messages, placed=on_flows)
    # The few message rows that the flow-level frames and the detectors judging requests and
    # their answers read (`Timeline.rpc_messages`): one scan, kept (on disk when large) before
    # the frames below take their rows from it.
    rpc_rows = message_frame.filter(RPC_MESSAGE_ROWS).select(RPC_MESSAGE_COLUMNS)
    rpc_frame = spill.keep(
        "rpc_messages",
        rpc_rows.collect(engine=_BIG).lazy().pipe(answered_requests, keyed=keyed),
    )
    rpc_messages = (
        rpc_frame.filter(RPC_ROWS).select(*RPC_COLUMNS, "answers").collect(engine=_SMALL).lazy()
    )
    delivered = delivered_responses(placed, keyed, rpc_messages).collect(engine=_SMALL).lazy()
    # The small frames, collected one at a time (their inputs above are in memory already:
    # collecting them together would only hold every intermediate at once), `tool_calls`
    # first so that the message rows can go.
    spill.keep(
        "tool_calls",
        rpc_messages.pipe(tool_calls, keyed=keyed, streams_of_flows=placed, tools=raw.tools),
    )
    del rpc_messages
    spill.keep("streams", placed.pipe(streams, keyed=keyed, delivered=delivered))
    spill.keep("incarnations", placed.pipe(incarnations, keyed=keyed, delivered=delivered))
    spill.keep(
        "resumptions",
        resolved.pipe(resumptions, keyed=keyed, streams_of_flows=placed, delivered=delivered),
    )
    spill.keep("sessions", keyed.pipe(sessions, streams_of_flows=placed))
    # Only the key columns of the flows stay: `exchanges` reads the others from the scan,
    # once, here (a dozen detectors read it: each would redo the scan, the join and the sort).
    flow_keys = spine.select("flow_id", *KEY_COLUMNS).lazy()
    del spine, keyed, issued, resolved, placed, delivered
    # The events replay judgements read, once the flow-level frames above are gone (each pass
    # over every event holds memory in proportion to the events): a sort of 8 bytes an event finds
    # the recurring ids, then the events are selected and written, then the messages they carried.
    events = raw.events.pipe(sse_events, placed=on_flows)
    recurring = recurring_keys(events).collect(engine=_BIG).lazy()
    spill.sink("recurring_events", recurring_events(events, recurring))
    spill.sink("resumed_events", resumed_events(events, spill.kept["resumptions"]))
    spill.sink(
        "replay_messages",
        replay_messages(
            message_frame,
            spill.kept["recurring_events"],
            spill.kept["resumed_events"],
        ),
    )
    spill.keep("id_counters", id_counters(events), engine=_BIG)
    spill.keep(
        "exchanges",
        raw.flows.join(flow_keys, on="flow_id", how="left").pipe(
            exchanges, streams_of_flows=on_flows
        ),
        engine=_BIG,
    )
    # Last (after the largest frame above, which peaks highest): the resumes placed at their
    # cursor, what their streams carried after it, and the progress they made.
    resumes = spill.keep(
        "resumes_at_cursor",
        resumed_at_cursor(spill.kept["resumptions"], spill.kept["resumed_events"], *RESUME_COLUMNS),
        engine=_BIG,
    )
    spill.keep(
        "after_cursor",
        after_cursor(resumes, spill.kept["resumed_events"], spill.kept["incarnations"]),
        engine=_BIG,
    )
    spill.sink(
        "resumed_progress",
        resumed_progress(
            spill.kept["replay_messages"], spill.kept["resumptions"], spill.kept["incarnations"]
        ),
    )
    return _assemble(raw, inputs, spill.kept)


def _assemble(raw: RawTables, inputs: Sequence[InputReport], kept: stored.StoredFrames) -> Timeline:
    """The Timeline of the collected frames (built now or stored), over the normalized tables."""
    raw = raw.redated(kept.get("event_dates"))
    on_flows = kept["placement"]
    return Timeline(
        exchanges=kept["exchanges"],
        sse_events=raw.events.pipe(sse_events, placed=on_flows),
        messages=raw.messages.pipe(messages, placed=on_flows),
        streams=kept["streams"],
        incarnations=kept["incarnations"],
        resumptions=kept["resumptions"],
        tool_calls=kept["tool_calls"],
        sessions=kept["sessions"],
        payloads=raw.payloads,
        inputs=tuple(inputs),
        payload_rows=raw.payload_rows,
        rpc_messages=kept["rpc_messages"],
        recurring_events=kept["recurring_events"],
        resumed_events=kept["resumed_events"],
        replay_messages=kept["replay_messages"],
        id_counters=kept["id_counters"],
        resumes_at_cursor=kept["resumes_at_cursor"],
        after_cursor=kept["after_cursor"],
        resumed_progress=kept["resumed_progress"],
    )


def _timeline(raw: RawTables, inputs: Sequence[InputReport], keyed: pl.LazyFrame) -> Timeline:
    """Every frame as a pure lazy plan over the normalized tables."""
    raw = raw.redated(event_dates(raw.events, raw.messages, keyed))
    issued = issued_cursors(raw.events, keyed)
    resolved = resolve_cursors(own_issues(keyed, issued), issued)
    placed = stream_map(keyed, resolved)
    on_flows = placement(keyed, placed)
    message_frame = raw.messages.pipe(messages, placed=on_flows)
    rpc_messages = (
        message_frame.filter(RPC_MESSAGE_ROWS)
        .select(RPC_MESSAGE_COLUMNS)
        .pipe(answered_requests, keyed=keyed)
    )
    delivered = delivered_responses(placed, keyed, rpc_messages)
    events = raw.events.pipe(sse_events, placed=on_flows)
    resumes = resolved.pipe(resumptions, keyed=keyed, streams_of_flows=placed, delivered=delivered)
    recurring = recurring_events(events, recurring_keys(events))
    resumed = resumed_events(events, resumes)
    incarnation_frame = placed.pipe(incarnations, keyed=keyed, delivered=delivered)
    placed_resumes = resumed_at_cursor(resumes, resumed, *RESUME_COLUMNS)
    replayed = replay_messages(message_frame, recurring, resumed)
    return Timeline(
        exchanges=keyed.pipe(exchanges, streams_of_flows=placed),
        sse_events=events,
        messages=message_frame,
        streams=placed.pipe(streams, keyed=keyed, delivered=delivered),
        incarnations=incarnation_frame,
        resumptions=resumes,
        tool_calls=rpc_messages.pipe(
            tool_calls, keyed=keyed, streams_of_flows=placed, tools=raw.tools
        ),
        sessions=keyed.pipe(sessions, streams_of_flows=placed),
        payloads=raw.payloads,
        inputs=tuple(inputs),
        payload_rows=raw.payload_rows,
        rpc_messages=rpc_messages,
        recurring_events=recurring,
        resumed_events=resumed,
        replay_messages=replayed,
        id_counters=id_counters(events),
        resumes_at_cursor=placed_resumes,
        after_cursor=after_cursor(placed_resumes, resumed, incarnation_frame),
        resumed_progress=resumed_progress(replayed, resumes, incarnation_frame),
    )


def load_timeline(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    workers: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    spill_dir: Path | None = None,
) -> Timeline:
    """Read the inputs (through the Parquet cache) and build their timeline (`spill_dir`: see
    `build_timeline`). With the cache, the collected frames of the timeline are read from it
    when an earlier analysis of the same inputs stored them, and stored otherwise
    (`analyzer.timeline.stored`). `on_progress` is told how far each parse is, `on_step` when
    the timeline is built rather than read from the cache."""
    ingested = read_inputs(
        paths,
        replica_header=replica_header,
        client_header=client_header,
        cache=cache,
        workers=workers,
        on_progress=on_progress,
    )
    raw = RawTables.from_ingested(ingested)
    folder = stored.target(ingested.directories) if cache else None
    kept = stored.read(folder, spill_dir=spill_dir, scan_from=_SPILL_ROWS) if folder else None
    if kept is not None:
        return _assemble(raw, ingested.inputs, kept)
    if on_step is not None:
        on_step("building the timeline")
    # None: nothing is stored (no cache, or the entry cannot be written to).
    writer = stored.Writer.start(folder) if folder else None
    try:
        built = build_timeline(raw, ingested.inputs, spill_dir=spill_dir, writer=writer)
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise
    if writer is not None:
        writer.commit()
    return built
