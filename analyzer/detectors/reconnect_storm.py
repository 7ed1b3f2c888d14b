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
from analyzer.timeline import reopened
from analyzer.wording import text

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
    storms = reopened.empty_runs(timeline, max_open_s=max_open_s, max_gap_s=max_gap_s)
    return emit(
        storms.filter(pl.col("flow_ids").list.len() >= min_streams),
        title=text(
            "{n} standalone GET streams ended empty by the server and reopened at once",
            n=pl.col("flow_ids").list.len(),
        ),
        detail=text(
            "Session {session_id}: the client opened its standalone stream {n} times in a row "
            "(GETs {flows}; answered by {replicas}) and each time the server answered 200 and "
            "ended the event stream with no event at all, so the client never held a cursor and "
            "reconnected at once. Nothing the server sends outside a request can reach this "
            "client, and the loop only stops when something breaks it.",
            n=pl.col("flow_ids").list.len(),
            flows=pl.col("flow_ids").list.join(", "),
            replicas=pl.col("_replicas").list.join(", "),
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
