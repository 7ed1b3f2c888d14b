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

# Longer than the 80 lines of STYLE.md item 8: two kinds of duplicate (different results, one
# message on two streams, by request id and by event id) share one evidence shape.

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.answers import ANSWER, CARRIER
from analyzer.timeline.keys import SESSIONLESS
from analyzer.timeline.replays import foreign_session_events, key_hash, recurring_hashes

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "send each response once, on its request's POST stream (replay it only on incarnations of "
    "that stream), and make side effects idempotent (idempotency keys) so a retried request "
    "cannot produce a second, different result."
)
_FRESH: Final = pl.col("incarnation").fill_null(0) == 0  # not a resume's replay


def _evidence(key: pl.Expr, texts: pl.Expr) -> list[pl.Expr]:
    """Per-group aggregations shared by both kinds of duplicate."""
    return [
        pl.col("era").first(),
        key.first().alias("key"),
        texts.alias("what"),
        pl.col("flow_id").sort_by("ts", "seq").unique(maintain_order=True).alias("flow_ids"),
        pl.col("stream_id")
        .sort_by("ts", "seq")
        .drop_nulls()
        .unique(maintain_order=True)
        .alias("stream_ids"),
        pl.col("event_id")
        .sort_by("ts", "seq")
        .drop_nulls()
        .unique(maintain_order=True)
        .alias("event_ids"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    ]


def _recurring(rows: pl.LazyFrame, *key: str) -> pl.LazyFrame:
    """The rows whose key recurs: only those can be in a group of two (a cheap pass over every
    row, so that the evidence lists are built for the few groups that can become findings).

    The pass, `recurring_hashes`, is collected first (a plan joining the rows to a key set it
    is still computing would hold them all until the set was complete); a collision lets a row
    through whose group then holds one row. A semi-join keeps the rows; when no key recurs
    (most captures: answer ids recur in resumes and reused ids only), none is read again."""
    keys = recurring_hashes(rows, *key).collect(engine="streaming")
    if keys.is_empty():
        return rows.clear()
    return rows.with_columns(key_hash(*key)).join(keys.lazy(), on="_key", how="semi").drop("_key")


def _placed(rows: pl.LazyFrame, timeline: Timeline) -> pl.LazyFrame:
    """`rows` with their carrier (stream, else flow) and their flow's era."""
    return rows.with_columns(CARRIER.alias("carrier")).join(
        timeline.exchanges.select("flow_id", "era"), on="flow_id", how="left"
    )


def _responses(timeline: Timeline) -> pl.LazyFrame:
    """The responses (results and errors) whose request id recurs in their session, keyed.

    They are read from `Timeline.rpc_messages` (a few in a hundred messages). The key of both kinds
    of duplicate response, (session, `rkey`[, payload]), refines (session, request id): only a
    response whose request id recurs can be in a group of two, so the flow columns (carrier,
    era) are joined to those alone. `rkey` is the request answered: in 2026-07-28 traffic the
    exchange that carried the response, else the request it answers (`analyzer.timeline.answers`:
    ids recur in a session key, and two requests with one id, each answered, are not one request
    answered twice), else (no captured request) its id."""
    # An error with a null id (a transport-level refusal: "Session not found" after a server
    # restart, a missing session header) answers no request: `ANSWER` leaves it out.
    recurring = _recurring(timeline.rpc_messages.filter(ANSWER), "session_id", "rpc_id")
    answers = recurring.collect(engine="streaming")
    # A resume's answers that another session received too are another session's responses,
    # replayed by a store the sessions share: cross-session-replay's finding, not a second
    # answer of this session's request. Looked for among the recurring answers (a resume that
    # answers a request twice repeats its id), held in memory as both plans read them.
    foreign = foreign_session_events(answers.lazy(), timeline.sse_events, timeline.sessions)
    return (
        answers.lazy()
        .join(foreign, on=["session_id", "flow_id", "event_id"], how="anti")
        .pipe(_placed, timeline)
        .with_columns(
            pl.when(SESSIONLESS.fill_null(False))
            .then(pl.format("{}/{}", "carrier", "rpc_id"))
            .when(pl.col("answers").is_not_null())
            .then(pl.format("{}/{}", "answers", "rpc_id"))
            .otherwise("rpc_id")
            .alias("rkey")
        )
    )


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per request id answered differently, or per message sent on two streams."""
    responses = _responses(timeline).cache()  # read by both kinds of duplicate response
    differ = (
        responses.group_by("session_id", "rkey")
        .agg(*_evidence(pl.col("rpc_id"), pl.col("payload_hash").n_unique()))
        .filter(pl.col("what") > 1)
        .with_columns(
            pl.format("{} different responses to request {}", "what", "key").alias("what"),
            pl.concat_list("key").alias("request_ids"),
        )
    )
    streams = pl.col("carrier").n_unique()
    twice_resp = (
        responses.filter(_FRESH)
        .group_by("session_id", "rkey", "payload_hash")
        .agg(*_evidence(pl.col("rpc_id"), streams))
        .filter(pl.col("what") > 1)
        .with_columns(
            pl.format("the response to request {} sent on {} logical streams", "key", "what")
            .alias("what"),
            pl.concat_list("key").alias("request_ids"),
        )
    )  # fmt: skip
    # Every fresh server message with an event id, of the events whose id recurs in their
    # session (`Timeline.recurring_events`): one message sent in two events is one of those
    # (their messages are among `Timeline.replay_messages`).
    recurring = timeline.recurring_events.filter(_FRESH).select("flow_id", "ordinal")
    # An id the session issued with several payloads names no one message (duplicate-event-id's
    # finding): equal payloads under it are equal payloads, as under fresh ids.
    naming_none = (
        timeline.recurring_events.group_by("session_id", "event_id")
        .agg(pl.struct("event", "payload_hash").n_unique().alias("_payloads"))
        .filter(pl.col("_payloads") > 1)
        .select("session_id", "event_id")
    )
    fresh = (
        timeline.replay_messages.filter(
            (pl.col("direction") == "s2c") & _FRESH
            & pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
        )
        .join(recurring, on=["flow_id", "ordinal"], how="semi")
        .join(naming_none, on=["session_id", "event_id"], how="anti", nulls_equal=True)
    )  # fmt: skip
    twice_event = (
        fresh.pipe(_placed, timeline)
        # In 2026-07-28 traffic there is no session for ids to be unique across: an event id
        # names a message within the exchange that carried it, as a response's id does.
        .with_columns(
            pl.when(SESSIONLESS.fill_null(False)).then("carrier").alias("_scope")
        )
        .group_by("session_id", "_scope", "event_id", "payload_hash")
        .agg(*_evidence(pl.col("event_id"), streams))
        .filter(pl.col("what") > 1)
        .with_columns(
            pl.format("event {} sent on {} logical streams", "key", "what").alias("what"),
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
        title=pl.format("Duplicate response: {}", "what"),
        detail=pl.format(
            "Session {}: {} (streams {}; flows {}; event ids {}). A request must be "
            "answered once, and a message sent on one stream only: the client keeps whichever "
            "copy comes first and the request may have executed twice. What to change:",
            "session_id",
            "what",
            pl.col("stream_ids").list.join(", ").replace("", "none"),
            pl.col("flow_ids").list.join(", "),
            pl.col("event_ids").list.join(", "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids="stream_ids",
        event_ids="event_ids",
        request_ids="request_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="duplicate-response",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
