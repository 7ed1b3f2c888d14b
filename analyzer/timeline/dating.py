"""When the events of an input without per-event times were sent (DESIGN.md §2).

A mitmproxy dump keeps a streamed body whole: its reader records it as one chunk timed at the
end of the response (`analyzer.ingest.mitm`), and a HAR entry without per-message times does the
same. Nothing marks such a flow, so it is recognised from the data: a flow whose event stream
came in one chunk, its events stamped with the response's end. Each of those events is dated at
the earliest time consistent with what is known: not before its response started, not before
the request it answers was sent (a legacy `/sse` stream answers POSTs sent long after it
opened), not before the event before it on its response, and not after its response ended. One
rule for complete and broken flows alike. Events of every other flow keep their times.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from analyzer import schema as S

__all__ = ["EVENT_DATES", "dated", "event_dates"]

EVENT_DATES: Final = pl.Schema({"flow_id": pl.String(), "ordinal": pl.Int32(), "dated_ts": S.TS})
"""The columns of `event_dates`."""


def event_dates(events: pl.LazyFrame, messages: pl.LazyFrame, keyed: pl.LazyFrame) -> pl.LazyFrame:
    """The new time (`dated_ts`) of each event of a flow without per-event times (RAW_EVENTS
    `events`, RAW_MESSAGES `messages`, the keyed flows with `sse`, `chunks`, `resp_ts`,
    `end_ts`, `session_id`). Empty, reading no event, when the flows show none."""
    flows = (
        keyed.filter(
            pl.col("sse").fill_null(False)
            & (pl.col("chunks") == 1)
            & pl.col("resp_ts").is_not_null()
            & pl.col("end_ts").is_not_null()
        )
        .select("flow_id", "session_id", "resp_ts", "end_ts")
        .collect()
    )
    if flows.is_empty():  # a proxy capture: every event has its own time
        return pl.LazyFrame(schema=EVENT_DATES)
    one_chunk = flows.lazy()
    untimed = events.join(one_chunk, on="flow_id").filter(pl.col("ts") == pl.col("end_ts"))
    answers = (
        messages.filter(
            (pl.col("source") == "sse")
            & (pl.col("direction") == "s2c")
            & pl.col("kind").is_in(["response", "error"])
            & pl.col("rpc_id").is_not_null()
        )
        .join(one_chunk.select("flow_id", "session_id", "end_ts"), on="flow_id")
        .select("flow_id", "ordinal", "session_id", "rpc_id", "end_ts")
    )
    requests = (
        messages.filter(
            (pl.col("direction") == "c2s")
            & (pl.col("kind") == "request")
            & pl.col("rpc_id").is_not_null()
        )
        .join(keyed.select("flow_id", "session_id"), on="flow_id")
        .select("session_id", "rpc_id", pl.col("ts").alias("sent"))
    )
    # The latest request with the answer's id sent before its response ended.
    sent = (
        answers.join(requests, on=["session_id", "rpc_id"])
        .filter(pl.col("sent") <= pl.col("end_ts"))
        .group_by("flow_id", "ordinal")
        .agg(pl.col("sent").max())
    )
    earliest = pl.max_horizontal("resp_ts", "sent")
    return (
        untimed.join(sent, on=["flow_id", "ordinal"], how="left")
        .sort("flow_id", "ordinal")
        .select(
            "flow_id",
            "ordinal",
            pl.min_horizontal(earliest.cum_max().over("flow_id"), "end_ts").alias("dated_ts"),
        )
    )


def dated(frame: pl.LazyFrame, dates: pl.LazyFrame | None) -> pl.LazyFrame:
    """RAW_EVENTS or RAW_MESSAGES rows with the times of `event_dates` (none: as they are)."""
    if dates is None:
        return frame
    return (
        # In the frame's own order: the stages after it read rows in wire order.
        frame.join(dates, on=["flow_id", "ordinal"], how="left", maintain_order="left")
        .with_columns(pl.coalesce("dated_ts", "ts").alias("ts"))
        .drop("dated_ts")
    )
