"""Runs of standalone GET streams the server ended at once with no event and the client reopened
at once: the evidence `reconnect-storm` judges.

An empty stream is a GET without Last-Event-ID answered 200 with an event stream that the server
ended (`complete` or `server_closed`) within `max_open_s` without a single event. A run is the
session's empty streams in a row, each opened within `max_gap_s` of the previous one's end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def empty_runs(timeline: Timeline, *, max_open_s: float, max_gap_s: float) -> pl.LazyFrame:
    """One row per run: `session_id`, the first stream's `era`, the GETs (`flow_ids`), the
    first request's `first_ts`, the last end's `last_ts` and the replicas that answered
    (`_replicas`)."""
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
    return (
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
    )
