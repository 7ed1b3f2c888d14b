"""A request or resume accepted (2xx) after its session was terminated.

A session ends when a DELETE carrying it is answered 2xx, or when the server answers 404 to a
request carrying it (the client MUST then re-initialize). A later request or Last-Event-ID resume
in that session answered 2xx means the server (or another replica behind the balancer) still
serves a session that is gone: the client may act in a session whose state was dropped, and a
replay may come from a log that should have been deleted (high). Not flagged: requests already in
flight when the session ended (sent before the DELETE or 404 was answered), the ending exchange
itself, answers of 404 or 4xx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import after_end
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "Share session termination across replicas (a session-scoped store all replicas "
    "consult), answer 404 to every request of an ended session, and have clients drop the "
    "session id and its cursors once it ends."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per terminated session that kept accepting requests."""
    how = pl.when(pl.col("_end_how") == "delete").then(pl.lit("a DELETE answered 2xx"))
    return emit(
        after_end.accepted(timeline),
        title=text(
            "{n} request(s) accepted after the session ended ({how})",
            n=pl.col("_flows").list.len(),
            how=pl.col("_end_how").cast(pl.String),
        ),
        detail=text(
            "Session {session_id} ended with {how} (flow {_end_flow}), yet {n} later request(s) "
            "were answered 2xx (flows {flows}; {_resumes} of them resumes with Last-Event-ID "
            "{cursors}; replica(s) {replicas}). The server still serves a session that is gone: "
            "the client acts in a session whose state was dropped, and a replay may come from a "
            "log that should have been deleted.",
            how=how.otherwise(pl.lit("a 404 to a request carrying it")),
            n=pl.col("_flows").list.len(),
            flows=pl.col("_flows").list.join(", "),
            cursors=pl.when(pl.col("event_ids").list.len() > 0)
            .then(pl.col("event_ids").list.join(", "))
            .otherwise(pl.lit("none")),
            replicas=pl.when(pl.col("_replicas").list.len() > 0)
            .then(pl.col("_replicas").list.join(", "))
            .otherwise(pl.lit("unknown")),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list(pl.col("_end_flow"), "_flows"),
        stream_ids="stream_ids",
        event_ids="event_ids",
        request_ids="request_ids",
        first_ts="_end_ts",
    )


DETECTOR: Final[Detector] = Detector(
    id="resume-after-termination",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
