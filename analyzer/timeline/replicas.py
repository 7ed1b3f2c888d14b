"""Resumes answered by a replica other than the one that issued their cursor, and not by one
that reads the stream's log: the evidence `cross-replica-resume` judges.

Replicas compare only when named the same way (`replica_source`: a header value never meets an
upstream address). An answering replica that delivered the response its stream owed, from a
replica other than the one that ran the request, shows it reads the stream's log (a shared
event store): the resume was no luck.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def moved_resumes(timeline: Timeline) -> pl.LazyFrame:
    """The resolved GET resumes answered 2xx by another replica than their cursor's
    (`Timeline.resumptions` columns), with the answer's `era`, the stream's `request_id`, and
    none whose answering replica reads the stream's log."""
    source = timeline.exchanges.select("flow_id", "replica_source", "era")
    requests = timeline.streams.select(
        "stream_id", "request_id", pl.col("replica").alias("_ran_on")
    )
    # Answers that delivered the response their stream owed: from a replica other than the one
    # that ran the request, that shows it reads the stream's log (the resume was no luck).
    delivered = timeline.incarnations.filter(pl.col("delivered_response")).select(
        "flow_id", pl.lit(True).alias("_delivered")
    )
    reads_the_log = pl.col("_delivered").fill_null(False) & (
        pl.col("answer_replica") != pl.col("_ran_on")
    ).fill_null(False)
    return (
        timeline.resumptions.filter(
            (pl.col("status") == "resolved")
            & (pl.col("method") == "GET")
            & pl.col("replica_changed").fill_null(False)
            & pl.col("answer_status").is_between(200, 299).fill_null(False)
        )
        .join(source, on="flow_id", how="left")
        .join(
            source.select("flow_id", pl.col("replica_source").alias("_cursor_source")),
            left_on="cursor_flow_id",
            right_on="flow_id",
            how="left",
        )
        # Replicas named the same way only: a header value never meets an upstream address.
        .filter(pl.col("replica_source") == pl.col("_cursor_source"))
        .join(requests, on="stream_id", how="left")
        .join(delivered, on="flow_id", how="left")
        .filter(~reads_the_log)
    )
