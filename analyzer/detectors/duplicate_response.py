"""One request answered twice with different results, or one message sent on two logical streams.

Answered twice: the server's responses (results or errors) to one client request id of a session
differ in payload (canonical JSON): the client keeps whichever came first, and the request may
have run twice. In 2026-07-28 traffic a response belongs to the exchange that carried it, so the
key there is (stream or exchange, id). Sent twice: one response (same id and payload) or one
event (same event id and payload) freshly sent, not replayed, on two logical streams: the server
"MUST NOT send a message on more than one stream". High.
Must not flag: a correct replay of stream S on a GET incarnation of S (same stream), identical
re-deliveries of a response, errors with a null id (they answer no request), id-only priming
events, replays on a resume of another stream (`cross-stream-replay`) or of another session's
events (`cross-session-replay`), equal notification payloads under fresh event ids or under an
id the session issued with several payloads (it names no one message: `duplicate-event-id`), and
in 2026-07-28 traffic one event id on two exchanges (no session makes ids unique across them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import resent
from analyzer.timeline.keys import SESSIONLESS
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "send each response once, on its request's POST stream (replay it only on incarnations of "
    "that stream), and make side effects idempotent (idempotency keys) so a retried request "
    "cannot produce a second, different result."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per request id answered differently, or per message sent on two streams."""
    answers = resent.responses(timeline).cache()  # read by both kinds of duplicate response
    differ = (
        answers.group_by("session_id", "rkey")
        .agg(*resent.evidence(pl.col("rpc_id"), pl.col("payload_hash").n_unique()))
        .filter(pl.col("what") > 1)
        .with_columns(
            text("{what} different responses to request {key}").alias("what"),
            pl.concat_list("key").alias("request_ids"),
        )
    )
    streams = pl.col("carrier").n_unique()
    twice_resp = (
        answers.filter(resent.FRESH)
        .group_by("session_id", "rkey", "payload_hash")
        .agg(*resent.evidence(pl.col("rpc_id"), streams))
        .filter(pl.col("what") > 1)
        .with_columns(
            text("the response to request {key} sent on {what} logical streams").alias("what"),
            pl.concat_list("key").alias("request_ids"),
        )
    )  # fmt: skip
    twice_event = (
        resent.fresh_events(timeline)
        # In 2026-07-28 traffic there is no session for ids to be unique across: an event id
        # names a message within the exchange that carried it, as a response's id does.
        .with_columns(
            pl.when(SESSIONLESS.fill_null(False)).then("carrier").alias("_scope")
        )
        .group_by("session_id", "_scope", "event_id", "payload_hash")
        .agg(*resent.evidence(pl.col("event_id"), streams))
        .filter(pl.col("what") > 1)
        .with_columns(
            text("event {key} sent on {what} logical streams").alias("what"),
            pl.lit([], dtype=pl.List(pl.String)).alias("request_ids"),
        )
        # A response sent twice is already reported by its request id.
        .join(twice_resp.select("session_id", pl.col("event_ids").list.first().alias("event_id")),
              on=["session_id", "event_id"], how="anti")
    )  # fmt: skip
    columns = ("session_id", "era", "what", "flow_ids", "stream_ids", "event_ids",
               "request_ids", "first_ts", "last_ts")  # fmt: skip
    found = pl.concat([f.select(columns) for f in (differ, twice_resp, twice_event)])
    return emit(
        found,
        title=text("Duplicate response: {what}"),
        detail=text(
            "Session {session_id}: {what} (streams {streams}; flows {flows}; event ids {events}). "
            "A request must be answered once, and a message sent on one stream only: the client "
            "keeps whichever copy comes first and the request may have executed twice. What to "
            "change:",
            streams=pl.col("stream_ids").list.join(", ").replace("", "none"),
            flows=pl.col("flow_ids").list.join(", "),
            events=pl.col("event_ids").list.join(", "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids="stream_ids",
        event_ids="event_ids",
        request_ids="request_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="duplicate-response", severity=Severity.HIGH, description=__doc__ or "", detect=detect,
    remedy=REMEDY,
)  # fmt: skip
