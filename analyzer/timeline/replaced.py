"""The standalone GET streams a newer GET stream of their session replaced, resumed after
that: the evidence `superseded-stream` judges.

A session's GET stream is replaced by the next GET stream the session opened. Both were kept
when the older one was still connected when the newer one opened and the server did not end it
(a server that replaces a standalone stream closes the old one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def resumed(timeline: Timeline) -> pl.LazyFrame:
    """One row per replaced GET stream resumed (GET, cursor resolved) after its replacement
    opened: `session_id`, `stream_id`, the replacing `_new_stream_id`, the first resume's
    `era`, `_kept` (both kept), `_answered` (some resume answered 2xx), the resumes'
    `flow_ids` and cursors (`event_ids`) in wire order, `first_ts` and `last_ts`."""
    # Each GET stream and the next GET stream its session opened: the one that replaced it.
    newer = (
        timeline.streams.filter(pl.col("kind") == "get")
        .sort("session_id", "ts", "seq")
        .select(
            "session_id",
            "stream_id",
            *(
                pl.col(c).shift(-1).over("session_id").alias(f"_new_{c}")
                for c in ("stream_id", "ts", "seq")
            ),
        )
        .filter(pl.col("_new_stream_id").is_not_null())
    )
    # Both kept: the older stream was still connected when the newer one opened, and the
    # server did not end it (a server that replaces a standalone stream closes the old one).
    kept = (
        timeline.incarnations.join(newer, on=["session_id", "stream_id"])
        .filter(
            (pl.col("ts") < pl.col("_new_ts"))
            & (pl.col("end_ts").is_null() | (pl.col("end_ts") > pl.col("_new_ts")))
            & pl.col("end_how").is_in(["client_closed", "open_at_shutdown"]).fill_null(True)
        )
        .select("stream_id", pl.lit(True).alias("_kept"))
        .unique()
    )
    after = (pl.col("ts") > pl.col("_new_ts")) | (
        (pl.col("ts") == pl.col("_new_ts")) & (pl.col("seq") > pl.col("_new_seq"))
    )
    wire = ("ts", "seq")
    return (
        timeline.resumptions.filter((pl.col("status") == "resolved") & (pl.col("method") == "GET"))
        .join(newer, on=["session_id", "stream_id"])
        .filter(after)
        .join(kept, on="stream_id", how="left")
        .join(timeline.exchanges.select("flow_id", "era"), on="flow_id", how="left")
        .group_by("session_id", "stream_id", "_new_stream_id")
        .agg(
            pl.col("era").first(),
            pl.col("_kept").any(),
            pl.col("answer_status").is_between(200, 299).any().alias("_answered"),
            pl.col("flow_id").sort_by(*wire).unique(maintain_order=True).alias("flow_ids"),
            pl.col("cursor").sort_by(*wire).unique(maintain_order=True).alias("event_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
    )
