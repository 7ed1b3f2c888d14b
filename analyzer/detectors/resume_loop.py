"""`min_resumes` resumes of a stream in a row with no new message while its response is owed.

A request's stream was resumed again and again (each GET carrying Last-Event-ID), every answer
brought no new non-priming event (priming events only, an empty stream, or a refusal), the
stream's response was owed at each resume and never arrived (medium: the client spins on a stream
the server no longer feeds, and will retry or give up on a request that may have run). Not
flagged: polling that delivers the response in the end (server closes with `retry`, client
resumes, the response arrives later), runs shorter than `min_resumes`, runs broken by a resume
that delivered a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import fruitless
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "Servers should answer a cursor they cannot continue with an error (404/400) instead of an "
    "empty stream and keep the stream's events in a session-scoped log until its response is "
    "delivered; clients should cap resumes, back off, and re-issue side-effecting requests "
    "only with idempotency keys."
)


def detect(timeline: Timeline, *, min_resumes: int = 5) -> pl.LazyFrame:
    """One finding per run of fruitless resumes of a stream whose response never came."""
    runs = fruitless.runs(timeline).filter(pl.col("flow_ids").list.len() >= min_resumes)
    return emit(
        runs,
        title=text(
            "{n} resumes of stream {stream_id} with no new message", n=pl.col("flow_ids").list.len()
        ),
        detail=text(
            "Session {session_id}: the stream of request {request_id} (stream {stream_id}) was "
            "resumed {n} times in a row (GETs {flows}; Last-Event-ID {cursors}; answered "
            "{statuses}) and no resume brought a new message, while its response was owed and "
            "never arrived. The client spins on a stream the server no longer feeds.",
            request_id=pl.col("request_id").fill_null("?"),
            n=pl.col("flow_ids").list.len(),
            flows=pl.col("flow_ids").list.join(", "),
            cursors=pl.col("event_ids").list.join(", "),
            statuses=pl.col("_status").list.join(", "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids=pl.concat_list("stream_id"),
        event_ids="event_ids",
        request_ids=pl.concat_list("request_id").list.drop_nulls(),
    )


DETECTOR: Final[Detector] = Detector(
    id="resume-loop",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
