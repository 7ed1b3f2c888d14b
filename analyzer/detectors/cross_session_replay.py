"""A resume that replayed another session's events (one event store shared across sessions).

A resume incarnation in session A answers one request twice (two responses to one request id
under different event ids: the second is not a replay of the first), and events it carried, same
id and payload, were delivered in another session B too. The SDKs' `EventStore` interface has no
session: the Python SDK keys a POST stream's events by its request id and every standalone
stream by `_GET_stream`, and each session numbers its requests from the start, so a store shared
by sessions (one in-memory store for the server, Redis behind replicas) replays B's messages of
"the same stream" on A's resume: A's client receives another session's progress, results and
server requests (high: they may hold another user's data).
Must not flag: sessions whose event ids and payloads coincide while each resume answers each
request once (per-stream counters in lockstep clients), one response replayed on several resumes
under its own event id. A resume answering a request twice whose events no other session
received is left to `duplicate-response` (when the answers differ).
What to change: scope the event store by session (key streams by session and stream, or wrap the
shared store per transport), so a cursor replays only its own session's stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detectors import Detector
from analyzer.findings import Severity
from analyzer.timeline.replays import foreign_session_events

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume that answered a request twice with events another session got."""
    shared = (
        foreign_session_events(timeline.rpc_messages, timeline.sse_events)
        .group_by("session_id", "flow_id")
        .agg(
            pl.col("request_ids").first(),
            pl.col("other").sort().unique(maintain_order=True).alias("others"),
            pl.col("other_flow").sort().unique(maintain_order=True).alias("other_flows"),
            pl.col("event_id").sort_by("ts").unique(maintain_order=True).alias("event_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .join(timeline.incarnations.select("flow_id", "stream_id", "cursor"), on="flow_id")
        .join(timeline.streams.select("stream_id", "era"), on="stream_id")
    )
    return shared.select(
        pl.col("session_id").alias("session"),
        "era",
        pl.format("Resume replayed events of session(s) {}",
                  pl.col("others").list.join(", ")).alias("title"),
        pl.format(
            "Session {}: the resume of stream {} from Last-Event-ID {} (flow {}) answered "
            "request(s) {} twice, and events it carried (ids {}) were delivered in session(s) {} "
            "too (flows {}). The event store serves several sessions under stream keys that are "
            "unique only within one (request ids, `_GET_stream`): this client received another "
            "session's messages. What to change: scope the event store by session, so that a "
            "cursor replays only its own session's stream.",
            "session_id", "stream_id", "cursor", "flow_id",
            pl.col("request_ids").list.join(", "),
            pl.col("event_ids").list.join(", "),
            pl.col("others").list.join(", "),
            pl.col("other_flows").list.join(", "),
        ).alias("detail"),
        pl.concat_list(pl.col("flow_id"), "other_flows").alias("flow_ids"),
        pl.concat_list("stream_id").alias("stream_ids"),
        "event_ids",
        "request_ids",
        "first_ts",
        "last_ts",
    )  # fmt: skip


DETECTOR: Final[Detector] = Detector(
    id="cross-session-replay", severity=Severity.HIGH, description=__doc__ or "", detect=detect
)
