"""A live incarnation of a stream left open and silent after a later resume of the stream.

A resume of stream S was answered 200 while an earlier incarnation of S was still open, and the
earlier one then carried no event and stayed open at least `overlap_s` past the resume's answer
(or to the end of the capture): two live incarnations of one stream, the older one orphaned,
neither fed nor closed (medium: whoever reads the older connection waits forever for messages
that now go to the newer one; punkpeye/fastmcp #331, a second resume with the same
Last-Event-ID silently replacing the first). Not flagged: an incarnation that ended (either
side) before or within `overlap_s` of the resume's answer, a resume refused (409 and the like),
an older incarnation that still carried events after the resume, new streams (a GET without a
cursor opens another logical stream: `superseded-stream`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import orphans
from analyzer.wording import pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "Servers should refuse a resume of a stream with a live connection (409) or end the "
    "older connection first; clients should close a connection before resuming its stream."
)


def detect(timeline: Timeline, *, overlap_s: float = 1.0) -> pl.LazyFrame:
    """One finding per incarnation orphaned by a later resume of its stream."""
    return emit(
        orphans.orphaned(timeline, overlap_s=overlap_s),
        title=text("Incarnation {incarnation} of stream {stream_id} orphaned by a later resume"),
        detail=text(
            "Session {session_id}: stream {stream_id} ({kind} stream) was resumed (GET "
            "{_new_flow}, Last-Event-ID {_new_cursor}, answered 200) while its incarnation "
            "{incarnation} (flow {flow_id}) was still open; that connection then carried nothing "
            "more and was not closed ({ended}). Two incarnations of one stream were live at once "
            "and the older one is orphaned: whoever reads it waits for messages that now go to "
            "the newer one.",
            kind=pl.col("kind").cast(pl.String).fill_null("?"),
            ended=pick(
                (pl.col("end_ts").is_null(), "open at the end of the capture"),
                otherwise=text("it ended only at {end}", end=pl.col("end_ts").dt.to_string()),
            ),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id", "_new_flow"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("_new_cursor"),
        request_ids=pl.concat_list("request_id").list.drop_nulls(),
        first_ts="_new_ts",
        last_ts=pl.coalesce("end_ts", "_new_ts"),
    )


DETECTOR: Final[Detector] = Detector(
    id="orphaned-incarnation",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
