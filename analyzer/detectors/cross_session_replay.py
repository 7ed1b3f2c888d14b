"""A resume that replayed another session's events (one event store shared across sessions).

The SDKs' `EventStore` interface has no session: the Python SDK keys a POST stream's events by
its request id and every standalone stream by `_GET_stream`, and each session numbers its
requests from the start, so a store shared by sessions (one in-memory store for the server,
Redis behind replicas) replays session B's messages of "the same stream" on session A's resume:
A's client receives another session's notifications, results and server requests (high: they
may hold another user's data). A resume incarnation of A is flagged when either
- it answers one request twice (two responses to one request id under different event ids: the
  second is no replay of the first) and events it carried, same id and payload, were delivered
  in another session too; or
- it carries an event that another session received, same payload, when it was first sent, and
  whose id no counter makes, so that two sessions cannot draw it alike by chance: one holding a
  UUID, or of the TypeScript SDK example store's form `<stream>_<epoch-ms>_<random>`.
Must not flag: sessions whose event ids and payloads coincide while each resume answers each
request once (per-stream counters in lockstep clients), or, answering twice, whose sessions both
issued an id alike when first sending (each numbers its own events; a shared store issues an id
once: the second answer is `duplicate-response`'s), one response replayed on several resumes
under its own event id, a cursor carried into another session (`stale-cursor`: no incarnation of
the new session's stream), sessions of two origins (a forward proxy's capture of a client of
several servers: each server numbers and sends its own events). A resume answering a request
twice whose events no other session received is left to `duplicate-response` (when the answers
differ).
"""

# Longer than the 80 lines of STYLE.md item 8: two rules, each reading the events only when it
# has a candidate, gathered into one finding per resume.

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.replays import foreign_session_events, same_origin
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "scope the event store by session, so that a cursor replays only its own session's stream."
)
_KEY: Final = ["event_id", "payload_hash"]
# Ids no counter makes, which two sessions cannot draw alike by chance: a UUID (the Python SDK's
# example store), or the TypeScript SDK example store's `<stream>_<epoch-ms>_<8 random base-36>`.
_DRAWN: Final = (
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
    r"|_\d{13}_[0-9a-z]{6,}$"
)


def _first_sent_elsewhere(timeline: Timeline) -> pl.LazyFrame:
    """The events of resumes whose drawn id (`_DRAWN`) another session received when it was first
    sent (fresh, not replayed): one row per event and such sending (the columns of
    `foreign_session_events`).

    Resumed events with such ids are few (the stored `resumed_events`); they are collected
    first, so that the streams and the events of every stream (the largest frame) are read only
    when there is one."""
    drawn = (
        timeline.resumed_events.filter(
            (pl.col("incarnation") > 0)
            & ~pl.col("id_only")
            & pl.col("event_id").str.contains(_DRAWN)
        )
        .select("stream_id", "flow_id", "ts", *_KEY)
        .collect(engine="streaming")
    )
    streams = timeline.streams if drawn.height else timeline.streams.clear()
    events = timeline.sse_events if drawn.height else timeline.sse_events.clear()
    resumed = drawn.lazy().join(streams.select("stream_id", "session_id"), on="stream_id")
    # A first sending: on a stream's opening response, unless a cursor from another session
    # opened it (`stale_cursor`: what it carries is replayed from that session).
    first = streams.filter(pl.col("stale_cursor").is_null()).select("stream_id")
    fresh = (
        events.filter(pl.col("incarnation") == 0)
        .join(drawn.lazy().select(_KEY).unique(), on=_KEY, how="semi")
        .join(first, on="stream_id", how="semi")
        .select(pl.col("session_id").alias("other"), pl.col("flow_id").alias("other_flow"), *_KEY)
    )  # fmt: skip
    return (
        resumed.join(fresh, on=_KEY)
        .filter(pl.col("other") != pl.col("session_id"))
        .pipe(same_origin, timeline.sessions)
        .select("session_id", "flow_id", "ts", *_KEY,
                pl.lit([], dtype=pl.List(pl.String)).alias("request_ids"), "other", "other_flow")
    )  # fmt: skip


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume that carried events another session received."""
    answered_twice = foreign_session_events(
        timeline.rpc_messages, timeline.sse_events, timeline.sessions
    )
    shared = (
        pl.concat([answered_twice, _first_sent_elsewhere(timeline)])
        .group_by("session_id", "flow_id")
        .agg(
            pl.col("request_ids")
            .list.explode(keep_nulls=False, empty_as_null=False)
            .unique()
            .sort(),
            pl.col("other").sort().unique(maintain_order=True).alias("others"),
            pl.col("other_flow").sort().unique(maintain_order=True).alias("other_flows"),
            pl.col("event_id").sort_by("ts").unique(maintain_order=True).alias("event_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .join(timeline.incarnations.select("flow_id", "stream_id", "cursor"), on="flow_id")
        .join(timeline.streams.select("stream_id", "era"), on="stream_id")
    )
    others = pl.col("others").list.join(", ")
    return emit(
        shared,
        title=text("Resume replayed events of session(s) {others}", others=others),
        detail=text(
            "Session {session_id}: the resume of stream {stream_id} from Last-Event-ID {cursor} "
            "(flow {flow_id}) carried events (ids {events}) that session(s) {others} received too "
            "(flows {flows}){twice}. The event store serves several sessions under stream keys "
            "that are unique only within one (request ids, `_GET_stream`): this client received "
            "another session's messages. What to change:",
            events=pl.col("event_ids").list.join(", "),
            others=others,
            flows=pl.col("other_flows").list.join(", "),
            twice=pl.when(pl.col("request_ids").list.len() > 0)
            .then(text(", and answered request(s) {requests} twice",
                       requests=pl.col("request_ids").list.join(", ")))
            .otherwise(pl.lit("")),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list(pl.col("flow_id"), "other_flows"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids="event_ids",
        request_ids="request_ids",
    )  # fmt: skip


DETECTOR: Final[Detector] = Detector(
    id="cross-session-replay",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
