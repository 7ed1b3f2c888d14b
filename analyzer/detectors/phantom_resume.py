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

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import continuations
from analyzer.wording import OPENER, or_unknown, pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume answered with anything but the replay, or response, that was due."""
    resumes = timeline.resumes_at_cursor.filter(
        pl.col("answer_status").is_between(200, 299)
        & (pl.col("answer_end_how") != "open_at_shutdown").fill_null(False)
    )
    due = continuations.due(timeline, resumes)
    answer = continuations.answers(timeline, resumes)
    unmet = continuations.unmet(timeline, resumes, answer, due)
    resumes = resumes.join(unmet.select("r_flow"), on="r_flow", how="semi")
    answer = answer.join(unmet.select("r_flow"), on="r_flow", how="semi")
    unserved = (
        unmet.join(continuations.continued(timeline, resumes, answer, due), on="r_flow", how="left")
        # Ids further along the counter go on the stream only where nothing it carried was due
        # (a fresh stream of a session-wide counter goes on past what it skipped, too).
        .filter(~(pl.col("by_token") | (pl.col("by_counter") & pl.col("owed"))).fill_null(False))
        .drop("by_token", "by_counter")
        .join(continuations.told(timeline, answer), on="r_flow", how="anti")
    )
    return _findings(timeline, unserved, continuations.sent(answer, unserved))


def _findings(timeline: Timeline, unserved: pl.LazyFrame, sent: pl.LazyFrame) -> pl.LazyFrame:
    """The findings of the resumes left unserved, given what their answers sent."""
    sent_ids = pl.col("sent").list.join(", ")
    sent_text = (
        pl.when(pl.col("payloads") > 0)
        .then(text("{payloads} fresh message(s) (ids {sent})", sent=sent_ids))
        .otherwise(text("only a new priming event ({sent})", sent=sent_ids))
    )
    instead = (
        pl.when(pl.col("owed"))
        .then(text("the response to request {request_id} it still owed"))
        .otherwise(
            text(
                "the {n} message(s) the stream had carried after the cursor ({due})",
                n=pl.col("due").list.len(),
                due=pl.col("due").list.join(", "),
            )
        )
    )
    detail = text(
        "The resume of stream {stream_id} ({what}) from cursor {cursor} (issued by replica "
        "{cursor_replica}) on flow {r_flow} was answered 200 by replica {answer_replica} with "
        "{sent} instead of {instead}. Nothing on the answer said the cursor was not honoured: the "
        "client takes it for a continuation and will never see those messages. What to change:",
        what=pl.col("what").fill_null("standalone GET stream"),
        cursor_replica=or_unknown("cursor_replica"),
        answer_replica=or_unknown("answer_replica"),
        sent=sent_text,
        instead=instead,
    )
    streams = timeline.streams.select(
        "stream_id",
        "session_id",
        "era",
        "request_id",
        OPENER.alias("what"),
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
            severity=pick((~pl.col("owed") | moved, "high"), otherwise="medium"),
            title=text("Resume of stream {stream_id} answered without its replay"),
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
