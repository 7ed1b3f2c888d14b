"""The incarnations a later resume of their stream left open and silent: the evidence
`orphaned-incarnation` judges.

`orphaned` pairs each incarnation answered 200 with the first later resume of its stream (a
cursor, answered 200) that found it still open: not ended within `overlap_s` of the resume's
answer, and carrying no event after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def orphaned(timeline: Timeline, *, overlap_s: float) -> pl.LazyFrame:
    """The orphaned incarnations (`session_id`, `stream_id`, `flow_id`, `incarnation`,
    `end_ts`), each with the resume that orphaned it (`_new_flow`, `_new_cursor`, `_new_ts`)
    and its stream's `era`, `kind` and `request_id`, in session and resume order."""
    answered = timeline.incarnations.filter(pl.col("status") == 200).select(
        "session_id", "stream_id", "flow_id", "incarnation", "cursor", "response_ts", "end_ts"
    )
    resumes = answered.filter(pl.col("cursor").is_not_null()).select(
        "stream_id",
        pl.col("flow_id").alias("_new_flow"),
        pl.col("incarnation").alias("_new_incarnation"),
        pl.col("cursor").alias("_new_cursor"),
        pl.col("response_ts").alias("_new_ts"),
    )
    tail = pl.duration(microseconds=int(overlap_s * 1e6))
    overlapping = (
        answered.join(resumes, on="stream_id")
        .filter(
            (pl.col("_new_incarnation") > pl.col("incarnation"))
            & (pl.col("response_ts") <= pl.col("_new_ts"))
            & (pl.col("end_ts").is_null() | (pl.col("end_ts") > pl.col("_new_ts") + tail))
        )
        # The first resume that found it live is the one that orphaned it.
        .sort("_new_ts")
        .group_by("flow_id", maintain_order=True)
        .first()
    )
    later_events = (
        timeline.sse_events.select("flow_id", "ts")
        .join(overlapping.select("flow_id", "_new_ts"), on="flow_id")
        .filter(pl.col("ts") > pl.col("_new_ts"))
        .select("flow_id")
        .unique()
    )
    streams = timeline.streams.select("stream_id", "era", "kind", "request_id")
    return (
        overlapping.join(later_events, on="flow_id", how="anti")
        .join(streams, on="stream_id", how="left")
        .sort("session_id", "_new_ts", "flow_id")
    )
