"""The flow-level and record-level frames: exchanges, sse_events, messages."""

from __future__ import annotations

import polars as pl

from analyzer import schema as S

__all__ = ["exchanges", "messages", "placement", "sse_events"]


def exchanges(keyed: pl.LazyFrame, *, streams_of_flows: pl.LazyFrame) -> pl.LazyFrame:
    """The EXCHANGES frame: every flow in its session, with its stream and incarnation."""
    return (
        keyed.join(
            streams_of_flows.select("flow_id", "stream_id", "incarnation"),
            on="flow_id",
            how="left",
        )
        .with_columns(
            pl.col("req_seq").alias("seq"),
            pl.col("resp_ts").alias("response_ts"),
            pl.col("resp_seq").alias("response_seq"),
        )
        .select(S.EXCHANGES.names())
        .sort("session_id", "ts", "seq", "flow_id", nulls_last=True)
    )


def placement(keyed: pl.LazyFrame, streams_of_flows: pl.LazyFrame) -> pl.LazyFrame:
    """flow_id -> session_id, stream_id, incarnation, stream base offsets: what `sse_events`
    and `messages` join to every record (a caller that reads them often collects it once)."""
    return keyed.select("flow_id", "session_id").join(streams_of_flows, on="flow_id", how="left")


def sse_events(events: pl.LazyFrame, *, placed: pl.LazyFrame) -> pl.LazyFrame:
    """The SSE_EVENTS frame (row order unspecified: sort by ts, seq, ordinal); `placed` is
    `placement(keyed, streams_of_flows)`."""
    return (
        events.join(placed, on="flow_id", how="left")
        .with_columns((pl.col("base_events") + pl.col("ordinal")).alias("stream_pos"))
        .select(S.SSE_EVENTS.names())
    )


def messages(raw: pl.LazyFrame, *, placed: pl.LazyFrame) -> pl.LazyFrame:
    """The MESSAGES frame (row order unspecified: sort by ts, seq, ordinal, member); `placed` is
    `placement(keyed, streams_of_flows)`."""
    return raw.join(placed, on="flow_id", how="left").select(S.MESSAGES.names())
