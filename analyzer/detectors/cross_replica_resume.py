"""A resume answered by a replica other than the one that issued its cursor.

A GET whose Last-Event-ID resolves to a stream of its session, answered 2xx by another replica
than the one whose response carried the cursor: unless every replica reads one session-scoped
event log, the answering replica cannot know what followed the cursor, so the resume worked, if
it did, by luck (medium). Whether it also lost or duplicated data is for `phantom-resume`,
`causal-gap` and `duplicate-event-id` to say. Not flagged: captures with no replica information,
replicas identified differently (a header value against an upstream address), resumes answered
with an error, foreign or unknown cursors (`stale-cursor`), and a resume whose answer delivered
the response to its stream's request from another replica than the one that ran the request:
that replica reads the stream's log (a shared event store: a correct deployment, not luck).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import replicas
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "Route each session to one replica (sticky routing on Mcp-Session-Id) or keep a "
    "session-scoped authoritative event log every replica reads."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume whose answer came from another replica than its cursor."""
    owed = pl.when(pl.col("response_owed") & pl.col("request_id").is_not_null()).then(
        text(" The stream still owed the response to request {request_id}.")
    )
    return emit(
        replicas.moved_resumes(timeline),
        title=text(
            "resume from {cursor} answered by {answer_replica}, cursor issued by {cursor_replica}"
        ),
        detail=text(
            "Session {session_id}: GET {flow_id} resumed stream {stream_id} from Last-Event-ID "
            "{cursor}, issued by replica {cursor_replica} (flow {cursor_flow_id}), but replica "
            "{answer_replica} answered it ({answer_status}, {events} event(s), {payloads} with a "
            "payload).{owed} Unless every replica reads one session-scoped event log, the "
            "answering replica cannot know what followed the cursor: this resume worked, if it "
            "did, by luck (duplicate-event-id, phantom-resume and causal-gap say whether data was "
            "lost or repeated here).",
            events=pl.col("answer_events").fill_null(0),
            payloads=pl.col("answer_payload_events").fill_null(0),
            owed=owed.otherwise(pl.lit("")),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("cursor_flow_id", "flow_id"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("cursor"),
        request_ids=pl.concat_list(pl.when("response_owed").then("request_id")),
        first_ts="cursor_ts",
        last_ts="ts",
    )


DETECTOR: Final[Detector] = Detector(
    id="cross-replica-resume",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
