"""Per-session timelines: the frames detectors read (DESIGN.md §2, `analyzer.schema`).

Every stage is a `LazyFrame -> LazyFrame` function (`keys`, `streams`, `exchanges`,
`resumptions`, `tool_calls`, `sessions`, ...). The frames are declared once, in order, in
`analyzer.timeline.frames`: each one's schema, whether it is a `Timeline` field and how it is
kept (`analyzer.timeline.kept`: in memory, or in a spill folder when large). `build_timeline`
chains the stages over the normalized tables and collects, at this edge, the flow-level spine
every frame shares (session keys, cursor resolution, the flow → stream map), then each declared
frame in turn, so detectors that each collect a frame do not redo them. `sse_events` and
`messages` stay lazy scans of the Parquet tables joined to the flows' placement: a detector
reads only the columns and rows it asks for. `assemble` makes the Timeline of the collected
frames, built now or read back from the cache (`analyzer.analysis` reads the inputs and the
cache: this package reads neither).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import polars as pl

from analyzer import schema as S
from analyzer.inputs import InputReport
from analyzer.normalize import NormalizedFrames
from analyzer.timeline.answers import CANCELLATION, REQUEST, answered_requests
from analyzer.timeline.counters import id_counters
from analyzer.timeline.cursors import RESUME_COLUMNS, after_cursor, resumed_at_cursor
from analyzer.timeline.dating import dated, event_dates
from analyzer.timeline.exchanges import exchanges, messages, placement, sse_events
from analyzer.timeline.frames import FRAMES
from analyzer.timeline.kept import Kept, Store
from analyzer.timeline.keys import KEY_COLUMNS, READ_COLUMNS, key_flows
from analyzer.timeline.progress import progress_groups
from analyzer.timeline.replays import (
    carried_keys,
    recurring_events,
    recurring_keys,
    replay_messages,
    resumed_events,
    resumed_flows,
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
    "assemble",
    "build_timeline",
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

# The flow columns the spine is made of: what `key_flows` reads and what the spine keeps as
# read, in one narrow collect of the flows (key_flows reads its input in several branches: a
# scan would be read once a branch).
_SPINE_READS = tuple(dict.fromkeys([*READ_COLUMNS, *(c for c in _SPINE if c not in KEY_COLUMNS)]))

# Engines for the collects of intermediates at this edge: the streaming engine for the scans of
# the Parquet tables (memory does not grow with them), the in-memory one for plans over the
# collected flow-level spine (a fraction of the rows: its lower per-operator cost wins there).
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
    # `resumed_progress` with each (stream, token) numbered (`analyzer.timeline.progress`).
    progress: pl.LazyFrame
    inputs: tuple[InputReport, ...] = ()
    payload_rows: pl.LazyFrame | None = None  # `RawTables.payload_rows`

    def frames(self) -> dict[str, pl.LazyFrame]:
        """The frames of DESIGN.md §3 by name (the keys of `analyzer.schema.TIMELINE_FRAMES`)."""
        return {name: getattr(self, name) for name in S.TIMELINE_FRAMES}

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


def _of_flows(frame: pl.DataFrame) -> pl.Expr:
    """The rows of the flows in `frame`'s `flow_id` column: a filter, which a scan applies as
    it reads (pushed down), where a join would take every row first."""
    return pl.col("flow_id").is_in(frame.get_column("flow_id").unique().implode())


def build_timeline(
    raw: RawTables,
    inputs: Sequence[InputReport] = (),
    *,
    spill_dir: Path | None = None,
    store: Store | None = None,
    several_origins: bool | None = None,
) -> Timeline:
    """Chain the stages over the normalized tables, collecting each frame of
    `analyzer.timeline.frames` once.

    `spill_dir`: a folder, kept by the caller while the Timeline is read, where large collected
    frames wait as Parquet files instead of in memory (`analyzer.timeline.kept`). `store`: where
    the collected frames are stored too, for later analyses of the same inputs (the caller
    commits it). `several_origins`: whether some run reaches several origins, when `raw` holds
    only some sessions of the analysis (`analyzer.timeline.keys.key_flows`).
    """
    kept = Kept(spill_dir, store)
    # Every stage but `exchanges` reads a few columns of the flows: keep those in memory,
    # and let `exchanges` take the rest from the Parquet scan when it is collected.
    flows = raw.flows.select(_SPINE_READS).collect(engine=_BIG)
    spine = flows.lazy().pipe(key_flows, several_origins).select(_SPINE).collect(engine=_SMALL)
    del flows
    keyed = spine.lazy()
    # Events of inputs without per-event times, dated before anything reads their times.
    raw = raw.redated(kept.keep("event_dates", event_dates(raw.events, raw.messages, keyed)))
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
    on_flows = kept.keep("placement", placement(keyed, placed))
    message_frame = raw.messages.pipe(messages, placed=on_flows)
    # The few message rows that the flow-level frames and the detectors judging requests and
    # their answers read (`Timeline.rpc_messages`): one scan, kept (on disk when large) before
    # the frames below take their rows from it.
    rpc_rows = message_frame.filter(RPC_MESSAGE_ROWS).select(RPC_MESSAGE_COLUMNS)
    rpc_frame = kept.keep(
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
    kept.keep(
        "tool_calls",
        rpc_messages.pipe(tool_calls, keyed=keyed, streams_of_flows=placed, tools=raw.tools),
    )
    del rpc_messages
    kept.keep("streams", placed.pipe(streams, keyed=keyed, delivered=delivered))
    kept.keep("incarnations", placed.pipe(incarnations, keyed=keyed, delivered=delivered))
    kept.keep(
        "resumptions",
        resolved.pipe(resumptions, keyed=keyed, streams_of_flows=placed, delivered=delivered),
    )
    kept.keep("sessions", keyed.pipe(sessions, streams_of_flows=placed))
    # Only the key columns of the flows stay: `exchanges` reads the others from the scan,
    # once, here (a dozen detectors read it: each would redo the scan, the join and the sort).
    flow_keys = spine.select("flow_id", *KEY_COLUMNS).lazy()
    del spine, keyed, issued, resolved, placed, delivered
    # The events replay judgements read, once the flow-level frames above are gone (each pass
    # over every event holds memory in proportion to the events): a sort of 8 bytes an event finds
    # the recurring ids, then the events are selected and written, then the messages they carried.
    # The id counters (a few rows a stream) come from the same pass as the recurring ids: the
    # streaming engine then reads the events and joins them to their flows once for both.
    events = raw.events.pipe(sse_events, placed=on_flows)
    recurring, counters = pl.collect_all([recurring_keys(events), id_counters(events)], engine=_BIG)
    kept.keep("recurring_events", recurring_events(events, recurring.lazy()))
    # The events of the resumed streams' flows, and the messages the events kept so far carried:
    # the rows of other flows and events are dropped before the join that places every record,
    # the other flows' by a filter the scan applies as it reads.
    flows_resumed = resumed_flows(on_flows, kept["resumptions"]).collect(engine=_SMALL)
    resumed = raw.events.filter(_of_flows(flows_resumed)).pipe(sse_events, placed=on_flows)
    kept.keep("resumed_events", resumed_events(resumed, kept["resumptions"]))
    carried = carried_keys(kept["recurring_events"], kept["resumed_events"]).collect(engine=_BIG)
    kept.keep(
        "replay_messages",
        raw.messages.filter(_of_flows(carried))
        .join(carried.lazy(), on=["flow_id", "ordinal"], how="semi")
        .pipe(messages, placed=on_flows)
        .pipe(replay_messages, carried.lazy()),
    )
    kept.keep("id_counters", counters.lazy())
    kept.keep(
        "exchanges",
        raw.flows.join(flow_keys, on="flow_id", how="left").pipe(
            exchanges, streams_of_flows=on_flows
        ),
    )
    # Last (after the largest frame above, which peaks highest): the resumes placed at their
    # cursor, what their streams carried after it, and the progress they made.
    resumes = kept.keep(
        "resumes_at_cursor",
        resumed_at_cursor(kept["resumptions"], kept["resumed_events"], *RESUME_COLUMNS),
    )
    kept.keep("after_cursor", after_cursor(resumes, kept["resumed_events"], kept["incarnations"]))
    progress = kept.keep(
        "resumed_progress",
        resumed_progress(kept["replay_messages"], kept["resumptions"], kept["incarnations"]),
    )
    kept.keep("progress", progress_groups(progress))
    return assemble(raw, inputs, kept.frames)


def assemble(
    raw: RawTables, inputs: Sequence[InputReport], kept: Mapping[str, pl.LazyFrame]
) -> Timeline:
    """The Timeline of the collected frames (`kept`: built now or stored, by name), over the
    normalized tables: the declared frames, each from `kept` or, a `scan` one, from `raw`."""
    raw = raw.redated(kept.get("event_dates"))
    on_flows = kept["placement"]
    scans = {
        "sse_events": raw.events.pipe(sse_events, placed=on_flows),
        "messages": raw.messages.pipe(messages, placed=on_flows),
        "payloads": raw.payloads,
    }
    frames = {
        f.name: scans[f.name] if f.how == "scan" else kept[f.name] for f in FRAMES if f.on_timeline
    }
    return Timeline(**frames, inputs=tuple(inputs), payload_rows=raw.payload_rows)
