"""Where a resume's cursor stands in the stream it resumes, for the detectors that judge replays.

Not a detector: the leading underscore keeps it out of the check that every detector module is
listed (tests/detectors/test_registry.py).
"""

from __future__ import annotations

import polars as pl

from analyzer.timeline.replays import INCARNATION


def resumed_at_cursor(
    resumptions: pl.LazyFrame, events: pl.LazyFrame, *more: str | pl.Expr
) -> pl.LazyFrame:
    """The resumes that became an incarnation of their own stream, placed at their cursor.

    Columns `stream_id, cursor, cursor_flow_id, r_flow, r_ts, r_inc` (the resume's flow, time
    and answer incarnation), then `more`, then `c_pos`: the last `stream_pos` at which the flow
    that issued the cursor carried that event id. A resume whose cursor that flow never carried
    drops out.
    """
    resumes = resumptions.filter(INCARNATION)
    # Only the (flow, id) pairs some resume names: select those events before aggregating.
    cursor_at = (
        events.join(
            resumes.select(
                pl.col("cursor_flow_id").alias("flow_id"), pl.col("cursor").alias("event_id")
            ),
            on=["flow_id", "event_id"],
            how="semi",
        )
        .group_by(pl.col("flow_id").alias("cursor_flow_id"), pl.col("event_id").alias("cursor"))
        .agg(pl.col("stream_pos").max().alias("c_pos"))
    )
    return resumes.select(
        "stream_id",
        "cursor",
        "cursor_flow_id",
        pl.col("flow_id").alias("r_flow"),
        pl.col("ts").alias("r_ts"),
        pl.col("answer_incarnation").alias("r_inc"),
        *more,
    ).join(cursor_at, on=["cursor_flow_id", "cursor"])
