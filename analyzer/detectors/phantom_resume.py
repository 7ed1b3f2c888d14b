"""A resume answered 200 that is not a continuation of its stream, and says nothing about it.

Flags a resume that became an incarnation of stream S (a GET whose Last-Event-ID S issued,
answered 2xx with an event stream) when something was due and the answer sent something else.
Due: the events S had carried after the cursor before the resume; or, when it had carried none,
the response S still owed (its request's response delivered on no incarnation before the
resume). Something else: none of the due events came again (a due payload counts under any id;
a due id with another payload is another message), yet the answer issued fresh non-priming
events or, when events were due, only a new priming event, which moves the client's cursor past
what it never got; for a due response, the response never came on this or a later
incarnation. Not when the answer went on with S's own messages: progress on a token S carried
or the response to S's request (a partial replay); ids further along a counter whose prefix the
session's other streams do not carry while one of them carries ids of its own (the ids encode
the stream, as §1 says they SHOULD: a replay with a gap, `causal-gap`'s); or, when only the
response was due, ids further along S's per-stream counter on an answer cut short (a
continuation as far as the wire tells; one the server ended without the response carried other
messages instead of it).
And nothing told the client the cursor was not honoured: no JSON-RPC error on the answer, no
control event (an SSE event whose type says the stream was reset or is new, or whose data
holds `"resumed": false`).
High when events were due, or the response was and another replica answered; medium when only
the response was due and no replica change is known (a server may emit unrelated messages before
the response is lost).
Must not flag: a correct replay followed by a new priming event; an answer that carried no
event at all (interrupted, or polling: the client keeps its cursor and resumes again); a
partial replay (`causal-gap` judges what it left out); an answer still open at capture end.
"""

# Longer than the 80 lines of STYLE.md item 8: two kinds of due (events, a response) and three
# ways of being told (status, error, control event) each need their own joins.

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import payloads_of
from analyzer.timeline.counters import own_prefixes, resume_counters
from analyzer.timeline.progress import earlier_tokens

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_HAS_ID: Final = pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
# An event type that names a stream reset or a new stream (any server's spelling of it).
_CONTROL_TYPE: Final = (
    r"(?i)(reset|restart|new[-_ .]?stream|stream[-_ .]?new|not[-_ .]?resumed"
    r"|resume[-_ .]?(failed|refused|rejected))"
)
_NOT_RESUMED: Final = pl.col("text").str.json_path_match("$.resumed") == "false"


def _told(timeline: Timeline, answer: pl.LazyFrame) -> pl.LazyFrame:
    """The answers (`r_flow`) that told the client its cursor was not honoured."""
    errors = timeline.rpc_messages.filter(
        (pl.col("direction") == "s2c") & (pl.col("kind") == "error")
    ).select(pl.col("flow_id").alias("r_flow"))
    typed = answer.filter(pl.col("event").str.contains(_CONTROL_TYPE).fill_null(False))
    # The payload texts are read only for the few answers asked about (none: no read at all).
    hashes = answer.select("data_hash").drop_nulls().unique().collect(engine="streaming")
    flagged = (
        payloads_of(timeline, hashes.lazy(), _NOT_RESUMED.alias("no"), text=False)
        if not hashes.is_empty()
        else pl.LazyFrame(schema={"data_hash": pl.String, "no": pl.Boolean})
    ).filter(pl.col("no").fill_null(False))
    said = answer.join(flagged.select("data_hash"), on="data_hash", how="semi")
    return pl.concat([errors, typed.select("r_flow"), said.select("r_flow")])


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume answered with anything but the replay, or response, that was due."""
    # The resumes placed at their cursor, and the events their streams carried after it that
    # issue an id, by id and payload (placed once when the timeline was built).
    resumes = timeline.resumes_at_cursor.filter(
        pl.col("answer_status").is_between(200, 299)
        & (pl.col("answer_end_how") != "open_at_shutdown").fill_null(False)
    )
    due = timeline.after_cursor.join(resumes.select("r_flow"), on="r_flow", how="semi")
    # The answers' own events (among the resumed streams'): joined on their flow, not through
    # every event of the stream.
    answer = timeline.resumed_events.join(
        resumes.select("r_flow", "stream_id"),
        left_on=["flow_id", "stream_id"],
        right_on=["r_flow", "stream_id"],
    ).select(
        pl.col("flow_id").alias("r_flow"), "event_id", "payload_hash", "stream_pos", "id_only",
        "event", "data_hash", "incarnation",
    )  # fmt: skip
    # The answers' events are many, what was due few: the join keeps what was due in its table.
    # A due payload came back under any id; a due id with another payload is another message.
    came = answer.select("r_flow", "payload_hash").join(
        due.select("r_flow", "payload_hash"), on=["r_flow", "payload_hash"], how="semi"
    )
    owed = _owed_only(timeline, resumes, due)
    due_events = due.group_by("r_flow").agg(
        pl.col("event_id").sort_by("stream_pos").unique(maintain_order=True).alias("due"),
        pl.all().exclude("event_id").first(),
    )
    columns = ["r_flow", "stream_id", "cursor", "cursor_flow_id", "cursor_replica",
               "answer_replica", "r_ts", "due", "owed"]  # fmt: skip
    # The resumes none of whose due came (few): collected, so that the judgements below read
    # only their answers.
    unmet = (
        pl.concat(
            [due_events.with_columns(pl.lit(False).alias("owed")).select(columns), owed],
            how="vertical_relaxed",
        )
        .join(came.select("r_flow"), on="r_flow", how="anti")
        .collect(engine="streaming")
        .lazy()
    )
    resumes = resumes.join(unmet.select("r_flow"), on="r_flow", how="semi")
    answer = answer.join(unmet.select("r_flow"), on="r_flow", how="semi")
    unserved = (
        unmet.join(_continued(timeline, resumes, answer, due), on="r_flow", how="left")
        # Ids further along the counter go on the stream only where nothing it carried was due
        # (a fresh stream of a session-wide counter goes on past what it skipped, too).
        .filter(~(pl.col("by_token") | (pl.col("by_counter") & pl.col("owed"))).fill_null(False))
        .drop("by_token", "by_counter")
        .join(_told(timeline, answer), on="r_flow", how="anti")
    )
    # What the answers sent, for the few resumes left.
    sent = (
        answer.join(unserved.select("r_flow"), on="r_flow", how="semi")
        .group_by("r_flow")
        .agg(
            pl.col("event_id").filter(_HAS_ID).sort_by("stream_pos").alias("sent"),
            (~pl.col("id_only")).sum().alias("payloads"),
        )
    )
    return _findings(timeline, unserved, sent)


def _continued(
    timeline: Timeline, resumes: pl.LazyFrame, answer: pl.LazyFrame, due: pl.LazyFrame
) -> pl.LazyFrame:
    """The answers (`r_flow`) that went on with the stream's own messages: progress on a token
    the stream carried before, the response to its request, or ids further along a counter
    whose prefix names the stream (`by_token`), or ids further along its per-stream counter
    (`by_counter`), unless they sent a due id with another payload."""
    answered = (
        answer.select("r_flow", "incarnation")
        .unique()
        .join(resumes.select("r_flow", "stream_id"), on="r_flow")
    )
    by_token = earlier_tokens(timeline.resumed_progress, answered)
    # An answer the server ended on its own without the owed response carried other messages
    # instead of it, counter or not; one cut short may still have been on its way to it.
    cut_short = resumes.filter((pl.col("answer_end_how") != "complete").fill_null(True))
    further = pl.col("per_stream") & (pl.col("a_n") > pl.col("c_n"))
    by_counter = resume_counters(cut_short, timeline.id_counters, timeline.incarnations).filter(
        further
    )
    counted = resume_counters(resumes, timeline.id_counters, timeline.incarnations).filter(further)
    by_prefix = counted.join(
        own_prefixes(
            counted.select("stream_id", "prefix"),
            timeline.streams.select("stream_id", "session_id"),
            timeline.id_counters,
        ),
        on=["stream_id", "prefix"],
        how="semi",
    ).select("r_flow")
    # The response to the stream's own request on the answer: a message only S carries.
    requests = timeline.streams.select("stream_id", pl.col("request_id").alias("rpc_id"))
    by_response = (
        timeline.rpc_messages.filter(
            (pl.col("direction") == "s2c") & (pl.col("kind") == "response")
        )
        .select(pl.col("flow_id").alias("r_flow"), "rpc_id")
        .join(resumes.select("r_flow", "stream_id"), on="r_flow")
        .join(requests, on=["stream_id", "rpc_id"], how="semi")
        .select("r_flow")
        .unique()
    )
    reused = (
        answer.select("r_flow", "event_id", "payload_hash")
        .join(
            due.select("r_flow", "event_id", pl.col("payload_hash").alias("was")),
            on=["r_flow", "event_id"],
        )
        .filter(pl.col("payload_hash").ne_missing(pl.col("was")))
    )
    return (
        pl.concat(
            [
                pl.concat([by_token, by_response, by_prefix]).with_columns(
                    pl.lit(True).alias("by_token")
                ),
                by_counter.select("r_flow", pl.lit(True).alias("by_counter")),
            ],
            how="diagonal",
        )
        .join(reused, on="r_flow", how="anti")
        .group_by("r_flow")
        .agg(pl.col("by_token", "by_counter").fill_null(False).any())
    )


def _owed_only(timeline: Timeline, resumes: pl.LazyFrame, due: pl.LazyFrame) -> pl.LazyFrame:
    """The resumes with no event due but the stream's response, which never came at or after
    them."""
    streams = timeline.streams.select("stream_id", "response_delivered", "response_ts")
    came_later = pl.col("response_delivered") & (pl.col("response_ts") >= pl.col("r_ts"))
    return (
        resumes.filter(pl.col("response_owed").fill_null(False))
        .join(due.select("r_flow"), on="r_flow", how="anti")
        .join(streams, on="stream_id")
        .filter(~came_later.fill_null(False))
        .select(
            "r_flow",
            "stream_id",
            "cursor",
            "cursor_flow_id",
            "cursor_replica",
            "answer_replica",
            "r_ts",
            pl.lit([], pl.List(pl.String)).alias("due"),
            pl.lit(True).alias("owed"),
        )
    )


def _findings(timeline: Timeline, unserved: pl.LazyFrame, sent: pl.LazyFrame) -> pl.LazyFrame:
    """The findings of the resumes left unserved, given what their answers sent."""
    sent_text = (
        pl.when(pl.col("payloads") > 0)
        .then(pl.format("{} fresh message(s) (ids {})", "payloads", pl.col("sent").list.join(", ")))
        .otherwise(pl.format("only a new priming event ({})", pl.col("sent").list.join(", ")))
    )
    instead = (
        pl.when(pl.col("owed"))
        .then(pl.format("the response to request {} it still owed", "request_id"))
        .otherwise(
            pl.format(
                "the {} message(s) the stream had carried after the cursor ({})",
                pl.col("due").list.len(),
                pl.col("due").list.join(", "),
            )
        )
    )
    detail = pl.format(
        "The resume of stream {} ({}) from cursor {} (issued by replica {}) on flow {} was "
        "answered 200 by replica {} with {} instead of {}. Nothing on the answer said the cursor "
        "was not honoured: the client takes it for a continuation and will never see those "
        "messages. What to change:",
        "stream_id",
        pl.col("what").fill_null("standalone GET stream"),
        "cursor",
        pl.col("cursor_replica").fill_null("unknown"),
        "r_flow",
        pl.col("answer_replica").fill_null("unknown"),
        sent_text,
        instead,
    )
    streams = timeline.streams.select(
        "stream_id",
        "session_id",
        "era",
        "request_id",
        pl.format("{} request {}", "request_method", "request_id").alias("what"),
    )
    # Only events were due: a new priming event alone misleads; a due response needs messages.
    answered = (pl.col("payloads") > 0) | (~pl.col("owed") & (pl.col("sent").list.len() > 0))
    moved = (pl.col("answer_replica") != pl.col("cursor_replica")).fill_null(False)
    return (
        unserved.join(sent.filter(pl.col("payloads").is_not_null()), on="r_flow")
        .filter(answered)
        .join(streams, on="stream_id")
        .pipe(
            emit,
            severity=pl.when(~pl.col("owed") | moved)
            .then(pl.lit(Severity.HIGH.value))
            .otherwise(pl.lit(Severity.MEDIUM.value)),
            title=pl.format("Resume of stream {} answered without its replay", "stream_id"),
            detail=detail,
            remedy=REMEDY,
            flow_ids=pl.concat_list("cursor_flow_id", "r_flow"),
            stream_ids=pl.concat_list("stream_id"),
            event_ids=pl.concat_list("cursor", "due", "sent"),
            request_ids=pl.concat_list("request_id"),
            first_ts="r_ts",
            last_ts="r_ts",
        )
    )


REMEDY: Final = (
    "replay from a session-scoped authoritative event log every replica can read, or route "
    "resumes to the replica that issued the cursor (sticky routing); answer a cursor you cannot "
    "honour with an error instead of 200 and a fresh stream."
)


DETECTOR: Final[Detector] = Detector(
    id="phantom-resume",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
