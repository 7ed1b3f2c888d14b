"""Where a resume's cursor stands in the stream it resumes, and what that stream carried after it.

`build_timeline` keeps both for the resumes that became an incarnation of their own stream
(`Timeline.resumes_at_cursor`, `Timeline.after_cursor`): the detectors judging replays
(`causal-gap`, `phantom-resume`) read them instead of placing every resume again each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import polars as pl

from analyzer.timeline.replays import INCARNATION, ISSUED

__all__ = [
    "AFTER_CURSOR_EVENT_COLUMNS",
    "LATEST_DELIVERY",
    "RESUME_COLUMNS",
    "after_cursor",
    "carried_after_cursor",
    "resumed_at_cursor",
]

RESUME_COLUMNS: Final = ("answer_status", "cursor_replica", "answer_replica", "response_owed",
                          "answer_end_how")  # fmt: skip
"""The RESUMPTIONS columns `Timeline.resumes_at_cursor` keeps besides `resumed_at_cursor`'s."""
AFTER_CURSOR_EVENT_COLUMNS: Final = ("ts", "incarnation", "stream_pos", "event_id", "payload_hash")
"""The SSE_EVENTS columns of `after_cursor` (besides the resume's)."""
LATEST_DELIVERY: Final = ("id_last_inc", "id_last_ts", "payload_last_inc", "payload_last_ts")
"""The columns `after_cursor` adds last: the latest incarnation and time at which the stream
carried an event with the row's id (`id_`), and with its payload (`payload_`)."""


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


def carried_after_cursor(
    resumes: pl.LazyFrame, events: pl.LazyFrame, incarnations: pl.LazyFrame, key: Sequence[str]
) -> pl.LazyFrame:
    """Each resume (`resumed_at_cursor` output) with the events of `events` (SSE_EVENTS columns)
    that its stream carried after the cursor and before the resume: past the cursor's position,
    on an incarnation requested before the resume's, sent before its request.

    Not every such event: of those with the same `key` values (an id and a payload, say), the
    ones sent earlier than every one before them in the stream. They hold the first of them each
    resume counts (any other was sent no earlier than one of them), so a reader that asks which
    keys a resume was due and where each first came gets the answer of all the events, and a
    resume loop (k resumes of one cursor, each replaying the same m events) costs k x m rows,
    not k x k x m.

    A stream's positions count the events of its earlier incarnations first (`stream_pos`), so
    those events hold the positions from `c_pos + 1` up to the first of the resume's own
    incarnation: the resumes of one cursor read the events of their widest range once, not
    every event of the stream each (a stream of m events resumed k times: k x m rows).
    """
    bases = incarnations.select(
        "stream_id", pl.col("incarnation").alias("r_inc"), pl.col("base_events").alias("_r_base")
    )
    placed = resumes.join(bases, on=["stream_id", "r_inc"]).cache()
    cursor = ["stream_id", "c_pos"]
    earlier = pl.col("ts").cum_min().shift(1).over([*cursor, *key])
    spans = (
        placed.group_by(cursor)
        .agg(
            pl.int_ranges(pl.col("c_pos").first() + 1, pl.col("_r_base").max()).alias("stream_pos")
        )
        .explode("stream_pos")
    )
    after = (
        events.join(spans, on=["stream_id", "stream_pos"])  # the few spans: the hash table
        .sort("stream_pos")
        .filter(earlier.is_null() | (pl.col("ts") < earlier))
    )
    return (
        placed.join(after, on=cursor)
        .filter((pl.col("stream_pos") < pl.col("_r_base")) & (pl.col("ts") < pl.col("r_ts")))
        .drop("_r_base")
    )


def after_cursor(
    resumes: pl.LazyFrame, resumed_events: pl.LazyFrame, incarnations: pl.LazyFrame
) -> pl.LazyFrame:
    """`carried_after_cursor` of the resumes (`resumed_at_cursor` output) over the events that
    issue an id, by id and payload: what each resume's stream carried after the cursor before
    it (`resumed_events`: the events of the streams a resume continued).

    With `LATEST_DELIVERY`: whether, and how late, the stream delivered each such event again.
    """
    candidates = resumed_events.filter(ISSUED).select("stream_id", *AFTER_CURSOR_EVENT_COLUMNS)
    carried = carried_after_cursor(
        resumes, candidates, incarnations, ("event_id", "payload_hash")
    ).cache()  # read by both lookups below and joined to them: computed once
    after = carried
    for key, prefix in (("event_id", "id"), ("payload_hash", "payload")):
        # Only the keys of these few rows are looked up among every event of the streams.
        wanted = carried.select("stream_id", key).unique()
        latest = (
            resumed_events.join(wanted, on=["stream_id", key], how="semi")
            .group_by("stream_id", key)
            .agg(
                pl.col("incarnation").max().alias(f"{prefix}_last_inc"),
                pl.col("ts").max().alias(f"{prefix}_last_ts"),
            )
        )
        after = after.join(latest, on=["stream_id", key], how="left", maintain_order="left")
    return after
