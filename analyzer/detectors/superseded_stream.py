"""A cursor of a standalone GET stream resumed after a newer GET stream of its session replaced it.

Servers keep one replay log for a session's standalone stream (the official SDKs key it per
session, not per GET), so resuming a replaced stream replays the newer stream's messages a second
time, or nothing: messages get duplicated or lost (medium: the conditions are present). Low when
the older stream was still connected when the newer one opened (the server kept both, as the
spec allows, and the resume may be meant) or when the server refused the resume. Not flagged:
POST streams, resumes of the latest GET stream, a new GET stream after the old one's last
resume.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import replaced
from analyzer.wording import pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "Clients should resume only the latest standalone stream and drop older GET streams' "
    "cursors when opening a new one; servers should encode the stream in event ids and "
    "refuse a replaced stream's cursor."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per replaced GET stream that was resumed."""
    cursors = pl.col("event_ids").list.join(", ")
    return emit(
        replaced.resumed(timeline),
        severity=pick((pl.col("_kept") | ~pl.col("_answered"), "low"), otherwise="medium"),
        title=text("replaced GET stream resumed from {cursors}", cursors=cursors),
        detail=text(
            "Session {session_id}: standalone GET stream {stream_id} was resumed (GET {flows}, "
            "Last-Event-ID {cursors}) after GET stream {_new_stream_id} had replaced it{why}. "
            "Servers keep one replay log per session's standalone stream (the official SDKs key "
            "it per session), so such a resume replays the newer stream's messages a second "
            "time, or nothing: messages get duplicated or lost.",
            flows=pl.col("flow_ids").list.join(", "),
            cursors=cursors,
            why=pick(
                (pl.col("_kept"), " (both were connected at once: the server kept the older one)"),
                (~pl.col("_answered"), " (the server refused the resume: nothing was replayed)"),
                otherwise="",
            ),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids=pl.concat_list("stream_id", "_new_stream_id"),
        event_ids="event_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="superseded-stream",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
