"""Runs of resumes that brought nothing while a response was owed: the evidence `resume-loop`
judges.

A run is the resumes (cursor resolved, the stream's response owed) of one request's stream whose
response never arrived, in wire order, that brought no new non-priming event; a resume that
brought a message ends the run before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def runs(timeline: Timeline) -> pl.LazyFrame:
    """One row per run: `session_id`, `stream_id`, its request's `era` and `request_id`, the
    resuming GETs (`flow_ids`), their distinct cursors (`event_ids`) and answer statuses
    (`_status`), `first_ts` and `last_ts`."""
    unanswered = timeline.streams.filter(
        (pl.col("kind") == "post") & ~pl.col("response_delivered").fill_null(False)
    ).select("stream_id", "request_id", "era")
    resumes = (
        timeline.resumptions.filter((pl.col("status") == "resolved") & pl.col("response_owed"))
        .join(unanswered, on="stream_id")
        .sort("stream_id", "ts", "seq")
        .with_columns(
            # A resume that brought a message starts a new run after it.
            (pl.col("answer_payload_events").fill_null(0) > 0)
            .cum_sum()
            .over("stream_id")
            .alias("_run")
        )
        .filter(pl.col("answer_payload_events").fill_null(0) == 0)
    )
    return resumes.group_by("session_id", "stream_id", "_run").agg(
        pl.col("era").first(),
        pl.col("request_id").first(),
        pl.col("flow_id").alias("flow_ids"),
        pl.col("cursor").unique(maintain_order=True).alias("event_ids"),
        pl.col("answer_status").cast(pl.String).unique(maintain_order=True).alias("_status"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    )
