"""The timeline's frames the OTLP export reads, collected once: the exchanges with their
first request's tool and the request bodies it reads, JSON-RPC error codes, tool results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.otlp.fields import json_field
from analyzer.timeline import payloads_of

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = ["NO_SESSION", "epoch", "error_codes", "exchange_frame", "tool_results"]

NO_SESSION: Final = "(no session)"
# A message's place on the wire: of two answers to one request (answered twice), the export
# names the first delivered, whatever order the frames' rows came in.
_DELIVERY: Final = ("ts", "seq", "ordinal", "member")


def epoch(frame: pl.LazyFrame, *columns: str) -> pl.LazyFrame:
    """Datetime columns as ns integers: Python datetimes stop at microseconds."""
    return frame.with_columns(pl.col(name).dt.epoch("ns") for name in columns)


def exchange_frame(t: Timeline, *, payloads: bool) -> pl.DataFrame:
    """The exchanges with their first request's tool name and the request bodies read.

    An exchange whose request record is missing (a torn or lost line) has no `ts` of its own:
    it starts at the first time known of it, its first SSE event's, else its response's, else
    its end's; one with none of them (a chunk without a whole event is all that is left of it)
    is not exported: a span must start somewhere. capture-health reports the damage.
    """
    first_request = (
        t.messages.filter(
            (pl.col("source") == "request_body")
            & (pl.col("kind") == "request")
            & pl.col("member").fill_null(0).eq(0)
        )
        .group_by("flow_id")
        .agg(pl.col("tool_name").first())
    )
    first_event = t.sse_events.group_by("flow_id").agg(pl.col("ts").min().alias("first_event"))
    timed = (
        t.exchanges.join(first_event, on="flow_id", how="left")
        .with_columns(pl.coalesce("ts", "first_event", "response_ts", "end_ts").alias("ts"))
        .filter(pl.col("ts").is_not_null())
    )
    frame = epoch(
        timed.select(
            "session_id",
            "stream_id",
            "ts",
            "seq",
            "flow_id",
            "run_id",
            "incarnation",
            "era",
            "method",
            "scheme",
            "authority",
            "path",
            "client_ip",
            "status",
            "last_event_id",
            "protocol_version",
            "rpc_kind",
            "rpc_id",
            "rpc_method",
            "replica",
            "response_ts",
            "end_how",
            "end_ts",
            "end_error",
            "request_body_hash",
            "unreachable",
        ),
        "ts",
        "response_ts",
        "end_ts",
    ).join(first_request, on="flow_id", how="left")
    bodies = _request_bodies(t, frame, payloads=payloads)
    return (
        frame.join(bodies, on="request_body_hash", how="left")
        .with_columns(pl.col("session_id").fill_null(NO_SESSION))
        .sort("ts", "seq", "flow_id")
        .collect()
    )


def _request_bodies(t: Timeline, exchanges: pl.LazyFrame, *, payloads: bool) -> pl.LazyFrame:
    """The request bodies the export reads: those naming a traceparent, and with
    `--otlp-payloads` those of tool calls (their arguments)."""
    wanted = pl.col("text").str.contains("traceparent", literal=True)
    if payloads:
        wanted = wanted | pl.col("text").str.contains('"tools/call"', literal=True)
    hashes = exchanges.select(pl.col("request_body_hash").alias("data_hash")).drop_nulls()
    return (
        payloads_of(t, hashes.unique())
        .filter(wanted & ~pl.col("base64"))
        .select(pl.col("data_hash").alias("request_body_hash"), pl.col("text").alias("body"))
    )


def error_codes(t: Timeline) -> dict[str, int]:
    """flow id -> JSON-RPC error code answering the exchange's own request (the first
    delivered)."""
    frame = (
        t.messages.filter((pl.col("kind") == "error") & (pl.col("direction") == "s2c"))
        .join(
            t.exchanges.select("flow_id", pl.col("rpc_id").alias("asked")),
            on="flow_id",
        )
        .filter(pl.col("rpc_id") == pl.col("asked"))
        .group_by("flow_id")
        .agg(pl.col("error_code").sort_by(*_DELIVERY, nulls_last=True).first())
        .drop_nulls()
        .collect()
    )
    return dict(zip(frame["flow_id"].to_list(), frame["error_code"].to_list(), strict=True))


def tool_results(t: Timeline) -> dict[str, str]:
    """flow id of a tools/call -> its result's JSON text, the first delivered
    (`--otlp-payloads` only)."""
    answered = (
        t.tool_calls.filter(pl.col("result_flow_id").is_not_null())
        .select("flow_id", "request_id", "result_flow_id")
        .join(
            t.messages.filter(
                pl.col("kind").is_in(["response", "error"]) & (pl.col("direction") == "s2c")
            ).select(
                pl.col("flow_id").alias("result_flow_id"),
                pl.col("rpc_id").alias("request_id"),
                "data_hash",
                *_DELIVERY,
            ),
            on=["result_flow_id", "request_id"],
        )
    )
    texts = payloads_of(t, answered.select("data_hash").unique()).filter(~pl.col("base64"))
    answers = (
        answered.join(texts, on="data_hash")
        .sort(*_DELIVERY, nulls_last=True)
        .unique("flow_id", keep="first", maintain_order=True)
        .select("flow_id", "text")
        .collect()
    )
    found: dict[str, str] = {}
    for flow_id, text in answers.iter_rows():
        body = json_field(text, "result") or json_field(text, "error")
        if body is not None:
            found[flow_id] = body
    return found
