"""A resume sooner than the last `retry:` of a stream the server closed (2025-11-25 polling).

After a server closes the connection of a stream that sent `retry: <ms>`, the client MUST wait
that long before it resumes (2025-11-25): a resume sooner than the last `retry` the stream
carried, less `tolerance` (a fraction, default 10%), is flagged (medium: a server that closed to
shed load or to move the stream is hit again before its state is ready). Not flagged: streams the
client closed (it may resume at once), resumes after the wait, streams that never sent `retry`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import waits
from analyzer.wording import or_unknown, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

# A server close is recorded as `complete` (the response ended cleanly) or `server_closed`.
_SERVER_CLOSE: Final = ("complete", "server_closed")
REMEDY: Final = (
    "Clients should honour the stream's last `retry` (and back off) before sending Last-Event-ID."
)


def detect(timeline: Timeline, *, tolerance: float = 0.1) -> pl.LazyFrame:
    """One finding per resume sent before its stream's `retry` had elapsed."""
    found = (
        waits.after_retry(timeline)
        .filter(
            pl.col("_prev_end").is_in(_SERVER_CLOSE)
            & pl.col("_retry_ms").is_not_null()
            # An incarnation still open at the resume is a parallel connection, not a reconnect.
            & (pl.col("_prev_end_ts") <= pl.col("ts"))
            & (pl.col("_wait_ms") < pl.col("_retry_ms") * (1.0 - tolerance))
        )
        .with_columns(pl.col("_wait_ms").round(1))
    )
    return emit(
        found.join(timeline.exchanges.select("flow_id", "era"), on="flow_id", how="left"),
        title=text("resume after {_wait_ms} ms, retry was {_retry_ms} ms"),
        detail=text(
            "Session {session_id}: the server closed the connection of stream {stream_id} (flow "
            "{_prev_flow}, replica {replica}) after `retry: {_retry_ms}`, and the client resumed "
            "it {_wait_ms} ms later (GET {flow_id}, Last-Event-ID {cursor}), sooner than the "
            "spec's wait (2025-11-25: the client MUST wait the retry time before resuming). A "
            "server that closes to shed load or to hand the stream over is hit again before it "
            "is ready, and a resume answered too early may replay nothing.",
            replica=or_unknown("_prev_replica"),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("_prev_flow", "flow_id"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("cursor"),
        first_ts="_prev_end_ts",
        last_ts="ts",
    )


DETECTOR: Final[Detector] = Detector(
    id="retry-violation",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
