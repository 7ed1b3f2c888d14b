"""A JSON-RPC response delivered on a standalone GET stream that resumes no request's stream.

The standalone GET stream "MUST NOT" carry a JSON-RPC response unless it resumes a request's
stream (2025-03-26 onwards): a GET whose Last-Event-ID resolves to a POST stream's event is an
incarnation of that stream and may replay its response, but a GET that opened a stream of its own
(no cursor, or a cursor its session never issued) may not. A response there is one the client
may not route to its pending request, or one the server also sent (or owed) elsewhere: medium.
An error response with a null id (a parse error the server could tie to no request) is low.
Must not flag: correct replays on a GET incarnation of a request's stream, legacy HTTP+SSE
(2024-11-05) sessions, whose single GET stream carries every response by design.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.wording import or_unknown, pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "send each response on its request's POST stream, and resolve a Last-Event-ID to the "
    "stream that issued it so only that stream is replayed."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per response message carried by a standalone GET stream."""
    gets = timeline.streams.filter(
        (pl.col("kind") == "get") & (pl.col("era") != "2024-11-05").fill_null(True)
    ).select("stream_id", "era", "stale_cursor", or_unknown("replica").alias("opened_on"))
    null_id = pl.col("rpc_id") == "null"
    opened = pick(
        (pl.col("stale_cursor").is_null(), "without a cursor"),
        otherwise=text("with Last-Event-ID {stale_cursor} that its session never issued"),
    )
    return emit(
        timeline.rpc_messages.filter(
            (pl.col("direction") == "s2c") & pl.col("kind").is_in(["response", "error"])
        )
        .join(gets, on="stream_id")
        .join(timeline.sessions.filter(pl.col("kind") == "legacy"), on="session_id", how="anti")
        .join(timeline.exchanges.select("flow_id", "replica"), on="flow_id", how="left")
        .with_columns(pl.col("rpc_id").fill_null("null")),
        severity=pick((null_id & (pl.col("kind") == "error"), "low"), otherwise="medium"),
        title=text("{kind} {rpc_id} on standalone GET stream {stream_id}"),
        detail=text(
            "Session {session_id}: standalone GET stream {stream_id} (opened {opened}, replica "
            "{opened_on}) carried a JSON-RPC {kind} with id {rpc_id} (event {event_id}, flow "
            "{flow_id}, replica {replica}, incarnation {incarnation}). The GET stream must not "
            "carry a response unless it resumes the stream of the request's POST, and this one "
            "resumes none: the client may never match it to its pending request, or the server "
            "sent it here instead of (or as well as) on the request's own stream. What to change:",
            opened=opened,
            event_id=pl.col("event_id").fill_null("none"),
            replica=or_unknown("replica"),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("event_id").list.drop_nulls(),
        request_ids=pl.concat_list(pl.when(~null_id).then("rpc_id")).list.drop_nulls(),
        first_ts="ts",
        last_ts="ts",
    )


DETECTOR: Final[Detector] = Detector(
    id="response-on-get-stream",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
