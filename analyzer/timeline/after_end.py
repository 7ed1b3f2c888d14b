"""What a session's server still accepted after the session ended: the evidence
`resume-after-termination` judges.

A session ends at a DELETE carrying it answered 2xx or at a 404 to a request carrying it
(`Timeline.sessions`' `end_how`, `end_ts`, `end_flow_id`). `accepted` gathers, per ended
session, the requests sent after that end and answered 2xx, the ending exchange left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def _distinct(name: str) -> pl.Expr:
    return pl.col(name).drop_nulls().unique(maintain_order=True)


def accepted(timeline: Timeline) -> pl.LazyFrame:
    """One row per ended session that answered 2xx to a later request: `session_id`, `era`,
    how and when it ended (`_end_how`, `_end_flow`, `_end_ts`), the accepted exchanges in wire
    order (`_flows`) with their `stream_ids`, `event_ids` (their Last-Event-IDs),
    `request_ids` and `_replicas`, how many were resumes (`_resumes`) and the last one's
    `last_ts`."""
    # Renamed: exchanges have their own `end_how` / `end_ts` (how each HTTP response ended).
    ended = timeline.sessions.filter(pl.col("end_how").is_in(["delete", "404"])).select(
        "session_id",
        pl.col("end_how").alias("_end_how"),
        pl.col("end_ts").alias("_end_ts"),
        pl.col("end_flow_id").alias("_end_flow"),
    )
    # A request sent only after the end was answered: not one already in flight.
    return (
        timeline.exchanges.join(ended, on="session_id")
        .filter(
            (pl.col("ts") > pl.col("_end_ts"))
            & (pl.col("flow_id") != pl.col("_end_flow"))
            & pl.col("status").is_between(200, 299)
        )
        .sort("ts", "seq")
        .group_by("session_id")
        .agg(
            pl.col("era", "_end_how", "_end_flow", "_end_ts").first(),
            pl.col("flow_id").alias("_flows"),
            _distinct("stream_id").alias("stream_ids"),
            _distinct("last_event_id").alias("event_ids"),
            _distinct("rpc_id").alias("request_ids"),
            _distinct("replica").alias("_replicas"),
            pl.col("last_event_id").is_not_null().sum().alias("_resumes"),
            pl.col("ts").max().alias("last_ts"),
        )
    )
