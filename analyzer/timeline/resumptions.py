"""The RESUMPTIONS frame: every request carrying a Last-Event-ID, and what became of it.

`status`: `resolved` when the cursor was issued in the request's own session (then
`stream_id` is the stream that issued it), `other_session` when only another session issued it
(`cursor_session_id` says which), `unresolved` when no captured event carries it.

`events_after` / `payload_events_after`: what the cursor's stream carried after the cursor
event and before this request, over all its earlier incarnations (positions count events of
incarnations in request order, then ordinals). `response_owed`: the stream answers a request
whose response had not been delivered on any incarnation before this request.
"""

from __future__ import annotations

import polars as pl

from analyzer import schema as S
from analyzer.timeline.order import latest_before

__all__ = ["resumptions"]


def resumptions(
    resolved: pl.LazyFrame,
    *,
    keyed: pl.LazyFrame,
    streams_of_flows: pl.LazyFrame,
    delivered: pl.LazyFrame,
) -> pl.LazyFrame:
    """The RESUMPTIONS frame, from `streams.resolve_cursors` output."""
    rows = resolved.with_columns(
        pl.coalesce("c_flow_id", "o_flow_id").alias("cursor_flow_id"),
        pl.coalesce("c_session_id", "o_session_id").alias("cursor_session_id"),
        pl.coalesce("c_ts", "o_ts").alias("cursor_ts"),
        pl.coalesce("c_ordinal", "o_ordinal").alias("_ordinal"),
        pl.coalesce("c_payload_seen", "o_payload_seen").alias("_payload_seen"),
        pl.coalesce("c_id_only", "o_id_only").alias("cursor_priming"),
    )
    cursor_place = streams_of_flows.join(keyed.select("flow_id", "replica"), on="flow_id").select(
        pl.col("flow_id").alias("cursor_flow_id"),
        pl.col("stream_id").alias("cursor_stream_id"),
        pl.col("incarnation").alias("cursor_incarnation"),
        pl.col("replica").alias("cursor_replica"),
        "base_events",
        "base_payload_events",
    )
    rows = rows.join(cursor_place, on="cursor_flow_id", how="left")

    # What the cursor's stream carried before this request: its incarnations requested earlier,
    # that is everything up to the end of the latest one before it (its base, in request order,
    # plus its own; `latest_before`: joining every resume to every incarnation of its stream
    # cost k^2 rows for a stream resumed k times).
    incarnation_sizes = streams_of_flows.join(
        keyed.select("flow_id", "ts", "req_seq", "events", "payload_events"), on="flow_id"
    ).select(
        pl.col("stream_id").alias("cursor_stream_id"),
        pl.col("ts").alias("_inc_ts"),
        pl.col("req_seq").alias("_inc_seq"),
        (pl.col("base_events") + pl.col("events")).alias("_carried"),
        (pl.col("base_payload_events") + pl.col("payload_events")).alias("_carried_payload"),
    )
    carried = latest_before(
        rows.select("flow_id", "cursor_stream_id", "ts", "seq"),
        incarnation_sizes,
        by=("cursor_stream_id",),
        on=("ts", "seq"),
        candidate_on=("_inc_ts", "_inc_seq"),
    ).select("flow_id", "_carried", "_carried_payload")
    first_delivery = delivered.group_by("stream_id").agg(pl.col("ts").min().alias("_resp_ts"))
    post_streams = (
        streams_of_flows.filter(pl.col("incarnation") == 0)
        .join(keyed.select("flow_id", "method", "rpc_id"), on="flow_id")
        .filter((pl.col("method") == "POST") & pl.col("rpc_id").is_not_null())
        .select(pl.col("stream_id").alias("cursor_stream_id"), pl.lit(True).alias("_post"))
        .join(
            first_delivery.rename({"stream_id": "cursor_stream_id"}),
            on="cursor_stream_id",
            how="left",
        )
    )
    answer = keyed.select(
        "flow_id",
        "method",
        pl.col("initialize").fill_null(False).alias("with_initialize"),
        pl.col("status").alias("answer_status"),
        pl.col("sse").alias("answer_sse"),
        pl.col("replica").alias("answer_replica"),
        pl.col("events").alias("answer_events"),
        pl.col("payload_events").alias("answer_payload_events"),
        pl.col("end_how").alias("answer_end_how"),
    ).join(
        streams_of_flows.select(
            "flow_id",
            pl.col("stream_id").alias("answer_stream_id"),
            pl.col("incarnation").alias("answer_incarnation"),
        ),
        on="flow_id",
        how="left",
    )
    return (
        rows.join(carried, on="flow_id", how="left")
        .join(post_streams, on="cursor_stream_id", how="left")
        .join(answer, on="flow_id", how="left")
        .with_columns(
            pl.when(pl.col("status") == "resolved").then("cursor_stream_id").alias("stream_id"),
            pl.when(pl.col("cursor_stream_id").is_not_null())
            .then(
                pl.max_horizontal(
                    pl.col("_carried").fill_null(0)
                    - pl.col("base_events")
                    - pl.col("_ordinal")
                    - 1,
                    pl.lit(0),
                )
            )
            .cast(pl.Int64)
            .alias("events_after"),
            pl.when(pl.col("cursor_stream_id").is_not_null())
            .then(
                pl.max_horizontal(
                    pl.col("_carried_payload").fill_null(0)
                    - pl.col("base_payload_events")
                    - pl.col("_payload_seen"),
                    pl.lit(0),
                )
            )
            .cast(pl.Int64)
            .alias("payload_events_after"),
            pl.when(pl.col("_post").fill_null(False))
            .then(pl.col("_resp_ts").is_null() | (pl.col("_resp_ts") > pl.col("ts")))
            .otherwise(pl.lit(False))
            .alias("response_owed"),
            pl.when(pl.col("answer_replica").is_not_null() & pl.col("cursor_replica").is_not_null())
            .then(pl.col("answer_replica") != pl.col("cursor_replica"))
            .alias("replica_changed"),
        )
        .select(S.RESUMPTIONS.names())
        .sort("session_id", "ts", "seq", "flow_id", nulls_last=True)
    )
