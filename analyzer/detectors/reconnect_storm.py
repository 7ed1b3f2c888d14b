"""`min_streams` standalone GET streams in a row that the server ended at once with no event.

A client opened the session's standalone stream (GET without Last-Event-ID, answered 200 with
an event stream), the server ended the response within `max_open_s` without a single event
(no id, no data), and the client opened it again within `max_gap_s`, over and over (medium:
the client never holds a stream the server can send on, so server-initiated messages have
nowhere to go, and the loop only stops when something breaks it; python-sdk #3257). Not
flagged: a standalone stream that carried any event (a priming event gives the client a cursor
to resume), GETs answered with anything but a 200 event stream (405, 409, 404), a stream the
client closed, an idle stream the server ended after `max_open_s`, reconnects later than
`max_gap_s`, runs shorter than `min_streams`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "Servers that cannot hold a standalone stream should answer the GET with 405, or send a "
    "priming event and a retry: field before closing; clients should count an empty stream "
    "as a failed attempt and back off."
)


def detect(
    timeline: Timeline, *, min_streams: int = 5, max_open_s: float = 5.0, max_gap_s: float = 5.0
) -> pl.LazyFrame:
    """One finding per run of empty, server-ended standalone GET streams reopened at once."""
    gets = timeline.exchanges.filter(
        (pl.col("method") == "GET") & pl.col("session_id").is_not_null()
    ).sort("session_id", "ts", "seq")
    lived = (pl.col("end_ts") - pl.col("response_ts")).dt.total_microseconds() / 1e6
    empty = (
        pl.col("last_event_id").is_null()
        & (pl.col("status") == 200)
        & pl.col("sse").fill_null(False)
        & (pl.col("events").fill_null(0) == 0)
        & pl.col("end_how").cast(pl.String).is_in(["complete", "server_closed"])
        & (lived <= max_open_s)
    )
    previous_end = pl.col("end_ts").shift(1).over("session_id")
    gap = (pl.col("ts") - previous_end).dt.total_microseconds() / 1e6
    storms = (
        gets.with_columns(empty.fill_null(False).alias("_empty"))
        .with_columns(pl.col("_empty").shift(1).over("session_id").alias("_after_empty"))
        .with_columns(
            # A GET that is not an empty stream, or comes late, starts a new run.
            (
                ~pl.col("_empty")
                | ~pl.col("_after_empty").fill_null(False)
                | (gap.fill_null(float("inf")) > max_gap_s)
            )
            .cum_sum()
            .over("session_id")
            .alias("_run")
        )
        .filter(pl.col("_empty"))
        .group_by("session_id", "_run")
        .agg(
            pl.col("era").first(),
            pl.col("flow_id").alias("flow_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("end_ts").max().alias("last_ts"),
            pl.col("replica").drop_nulls().unique(maintain_order=True).alias("_replicas"),
        )
        .filter(pl.col("flow_ids").list.len() >= min_streams)
    )
    return emit(
        storms,
        title=pl.format(
            "{} standalone GET streams ended empty by the server and reopened at once",
            pl.col("flow_ids").list.len(),
        ),
        detail=pl.format(
            "Session {}: the client opened its standalone stream {} times in a row (GETs {}; "
            "answered by {}) and each time the server answered 200 and ended the event "
            "stream with no event at all, so the client never held a cursor and reconnected "
            "at once. Nothing the server sends outside a request can reach this client, and "
            "the loop only stops when something breaks it.",
            "session_id",
            pl.col("flow_ids").list.len(),
            pl.col("flow_ids").list.join(", "),
            pl.col("_replicas").list.join(", "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids="flow_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="reconnect-storm",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
