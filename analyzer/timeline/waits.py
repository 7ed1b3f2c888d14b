"""Each resume with the incarnation it follows and the wait it owed: the evidence
`retry-violation` judges.

The client keeps the last `retry:` it saw on a stream, over all earlier incarnations
(2025-11-25: after the server closes the connection the client MUST wait that long before it
resumes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from analyzer.timeline.order import latest_before

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def after_retry(timeline: Timeline) -> pl.LazyFrame:
    """The resolved resumes, each with the incarnation it follows (the stream's latest one
    requested before it: `_prev_flow`, `_prev_ts`, `_prev_end`, `_prev_end_ts`,
    `_prev_replica`), the last retry the stream carried up to that incarnation (`_retry_ms`)
    and the milliseconds from its end to the resume (`_wait_ms`); all null for a stream that
    never sent `retry`."""
    resolved = timeline.resumptions.filter(pl.col("status") == "resolved")
    # Only the resumed streams' incarnations are sorted (a fraction of them), and of those only
    # the streams that ever sent `retry` (a resume of another has no wait to honour).
    incs = (
        timeline.incarnations.join(resolved.select("stream_id"), on="stream_id", how="semi")
        .filter(pl.col("last_retry_ms").is_not_null().any().over("stream_id"))
        .sort("stream_id", "ts", "seq")
        .select(
            "stream_id",
            pl.col("flow_id").alias("_prev_flow"),
            pl.col("ts").alias("_prev_ts"),
            pl.col("seq").alias("_prev_seq"),
            pl.col("end_how").alias("_prev_end"),
            pl.col("end_ts").alias("_prev_end_ts"),
            pl.col("replica").alias("_prev_replica"),
            pl.col("last_retry_ms").forward_fill().over("stream_id").alias("_retry_ms"),
        )
    )
    resumes = latest_before(
        resolved, incs, by=("stream_id",), on=("ts", "seq"), candidate_on=("_prev_ts", "_prev_seq")
    )
    wait_ms = (pl.col("ts") - pl.col("_prev_end_ts")).dt.total_microseconds() / 1000.0
    return resumes.with_columns(wait_ms.alias("_wait_ms"))
