"""The TOOL_CALLS frame: every `tools/call` request, its fate and the tool's annotations.

Result matching: the first response or error that answers the call (`analyzer.timeline.answers`:
one on the call's own stream or exchange; outside 2026 traffic also one elsewhere, a GET stream,
when the call is the latest request of the session with its id before it), at or after the call.

MRTR leg: params carry `inputResponses` or `requestState`, or the previous call of the same
tool with the same arguments in the session got an InputRequiredResult.

Annotations: from the `tools/list` result of the same server (`keys.ENDPOINT`: authority, or
origin where the analysis reaches several, and path of the endpoint the list was requested from)
in force at the call: the latest one at or before it, else (a client that listed later, or in
another capture) the latest anywhere in the capture. A server may change a tool's annotations
mid-session (`notifications/tools/list_changed`): calls made while it was listed read-only stay
read-only. A listed tool gets the spec's defaults for hints
it does not set (readOnly false, destructive true, idempotent false, openWorld true); a tool no
captured list names has null hints and `tool_listed` false.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import polars as pl

from analyzer import schema as S
from analyzer.timeline.answers import CANCELLATION, CARRIER, REQUEST
from analyzer.timeline.keys import ENDPOINT

__all__ = ["HEADER_PARAMS", "RPC_COLUMNS", "RPC_ROWS", "header_params", "tool_calls"]

RPC_ROWS = (
    (pl.col("direction") == "c2s")
    & pl.col("method").is_in(["tools/call", "tools/list", "notifications/cancelled"])
) | (
    (pl.col("direction") == "s2c")
    & pl.col("kind").is_in(["response", "error"])
    & pl.col("rpc_id").is_not_null()
)
"""The MESSAGES rows `tool_calls` and `streams.delivered_responses` read."""

RPC_COLUMNS = ("session_id", "stream_id", "flow_id", "incarnation", "ts", "seq", "direction",
               "kind", "rpc_id", "method", "tool_name", "arguments_hash", "mrtr_params",
               "input_required", "is_error", "cancel_id")  # fmt: skip
"""The MESSAGES columns they read (and `answers`: `analyzer.timeline.answers`)."""


_SAME_CALL = ("session_id", "tool_name", "arguments_hash")
_HINTS = ("annotated", "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


def _listings(tools: pl.LazyFrame, *, keyed: pl.LazyFrame, messages: pl.LazyFrame) -> pl.LazyFrame:
    """Every listing of a tool: server, tool_name, ts, seq and its hints.

    The server is the endpoint of the request the listing answers (`analyzer.timeline.answers`:
    a legacy server lists on its GET stream, another endpoint), else (its request not captured)
    that of the exchange that carried it."""
    endpoint = ENDPOINT
    listing = ["flow_id", "seq", "rpc_id"]
    answered = (
        messages.filter(pl.col("answers").is_not_null())
        .join(tools.select(listing).unique(), on=listing, how="semi")  # the few listings only
        .group_by(listing)
        .agg(pl.col("answers").min())
    )
    return (
        tools.join(answered, on=listing, how="left")
        .join(keyed.select(pl.col("flow_id").alias("answers"), endpoint.alias("_req_server")),
              on="answers", how="left")
        .join(keyed.select("flow_id", endpoint.alias("_server")), on="flow_id", how="left")
        .select(pl.coalesce("_req_server", "_server").alias("server"), "tool_name", "ts", "seq",
                *_HINTS)
    )  # fmt: skip


def _annotated(calls: pl.LazyFrame, listings: pl.LazyFrame) -> pl.LazyFrame:
    """`calls` with the hints in force at each (`_HINTS`) and `tool_listed`, row for row."""
    key = ["server", "tool_name"]
    latest = listings.group_by(key).agg(pl.col(c).sort_by("ts", "seq").last() for c in _HINTS)
    before = pl.col("_before").fill_null(False)
    return (
        calls.sort("ts")
        .join_asof(
            listings.drop_nulls(key)
            .sort("ts", "seq")
            .select(*key, "ts", *_HINTS, pl.lit(True).alias("_before")),
            on="ts",
            by=key,
            strategy="backward",  # the latest listing at or before the call
            check_sortedness=False,  # both sorted by ts just above
        )
        .join(latest, on=key, how="left", suffix="_latest")
        .with_columns(
            *(pl.when(before).then(c).otherwise(f"{c}_latest").alias(c) for c in _HINTS),
            (before | pl.col("annotated_latest").is_not_null()).alias("tool_listed"),
        )
        .drop("_before", *(f"{c}_latest" for c in _HINTS))
    )


def tool_calls(
    messages: pl.LazyFrame,
    *,
    keyed: pl.LazyFrame,
    streams_of_flows: pl.LazyFrame,
    tools: pl.LazyFrame,
) -> pl.LazyFrame:
    """The TOOL_CALLS frame, from the MESSAGES timeline frame and the RAW_TOOLS table."""
    # One pass over the messages picks every row this frame reads (a few per call); the parts
    # below read this small frame, cached so that the scan is not repeated for each of them.
    messages = messages.filter(RPC_ROWS).cache()
    calls = (
        messages.filter(REQUEST & (pl.col("method") == "tools/call"))
        .select(
            "session_id",
            "flow_id",
            "ts",
            "seq",
            pl.col("rpc_id").alias("request_id"),
            "tool_name",
            "arguments_hash",
            "mrtr_params",
        )
        .join(
            keyed.select(
                "flow_id",
                "era",
                ENDPOINT.alias("server"),
                "status",
                "sse",
                "end_how",
            ),
            on="flow_id",
            how="left",
        )
        .join(streams_of_flows.select("flow_id", "stream_id"), on="flow_id", how="left")
    )
    results = messages.filter(pl.col("answers").is_not_null()).select(
        "session_id",
        pl.col("rpc_id").alias("request_id"),
        "answers",
        pl.col("flow_id").alias("result_flow_id"),
        pl.col("ts").alias("result_ts"),
        pl.col("seq").alias("_result_seq"),
        pl.col("kind").alias("result_kind"),
        pl.col("is_error").alias("result_is_error"),
        "input_required",
        pl.col("stream_id").alias("_result_stream"),
        pl.col("incarnation").alias("_result_incarnation"),
    )
    # The first result that answers the call (`analyzer.timeline.answers`), at or after it.
    matched = (
        calls.select("session_id", "flow_id", "request_id", "ts", CARRIER.alias("answers"))
        .join(results, on=["session_id", "request_id", "answers"])
        .filter(pl.col("result_ts") >= pl.col("ts"))
        .group_by("flow_id", "request_id")
        .agg(
            pl.col(c).sort_by("result_ts", "_result_seq").first()
            for c in (
                "result_flow_id",
                "result_ts",
                "result_kind",
                "result_is_error",
                "input_required",
                "_result_stream",
                "_result_incarnation",
            )
        )
    )
    cancels = (
        messages.filter(CANCELLATION & pl.col("cancel_id").is_not_null())
        .select(
            "session_id", pl.col("cancel_id").alias("request_id"), pl.lit(True).alias("cancelled")
        )
        .unique()
    )
    outcome = (
        pl.when(pl.col("status").is_null())
        .then(pl.lit("no_response"))
        .when(pl.col("status") == 404)
        .then(pl.lit("404"))
        .when(~pl.col("status").is_between(200, 299))
        .then(pl.lit("http_error"))
        .when(pl.col("result_flow_id") == pl.col("flow_id"))
        .then(pl.lit("delivered"))
        .when(pl.col("status") == 202)
        .then(pl.lit("accepted"))
        .when(
            pl.col("sse")
            & (pl.col("end_how").is_null() | (pl.col("end_how") == "open_at_shutdown"))
        )
        .then(pl.lit("open"))
        .otherwise(pl.lit("broken"))
    )
    listed = pl.col("tool_listed")
    return (
        calls.join(matched, on=["flow_id", "request_id"], how="left")
        .join(cancels, on=["session_id", "request_id"], how="left")
        .pipe(_annotated, _listings(tools, keyed=keyed, messages=messages))
        .with_columns(
            outcome.cast(S.OUTCOME).alias("first_outcome"),
            pl.col("result_flow_id").is_not_null().alias("result_delivered"),
            pl.when(pl.col("_result_stream") == pl.col("stream_id"))
            .then("_result_incarnation")
            .alias("result_incarnation"),
            pl.col("cancelled").fill_null(False),
            listed.fill_null(False),
            pl.when(listed).then(pl.col("annotated")).alias("annotated"),
            pl.when(listed).then(pl.col("read_only_hint").fill_null(False)),
            pl.when(listed).then(pl.col("destructive_hint").fill_null(True)),
            pl.when(listed).then(pl.col("idempotent_hint").fill_null(False)),
            pl.when(listed).then(pl.col("open_world_hint").fill_null(True)),
        )
        # A leg of an MRTR exchange: it says so, or the call before it with the same key got
        # InputRequiredResult. Sorted by key, the call before is the row before (two sorts cost
        # less than a window over the key).
        .sort(*_SAME_CALL, "ts", "seq", "flow_id", nulls_last=True)
        .with_columns(
            (
                pl.col("mrtr_params").fill_null(False)
                | (
                    pl.all_horizontal(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in _SAME_CALL)
                    & pl.col("input_required").shift(1)
                ).fill_null(False)
            ).alias("mrtr")
        )
        .sort("session_id", "ts", "seq", "flow_id", nulls_last=True)
        .select(S.TOOL_CALLS.names())
    )


PREVIOUS: Final = ("session_id", "flow_id", "stream_id", "request_id", "ts", "replica", "rank",
                   "first_outcome", "result_delivered", "result_ts", "input_required")  # fmt: skip
"""The columns of the call before it that `previous_calls` gives each call, as `prev_<column>`."""


def previous_calls(
    calls: pl.LazyFrame, sessions: pl.LazyFrame, exchanges: pl.LazyFrame
) -> pl.LazyFrame:
    """The calls that are not read-only and whose key (client, server, tool, arguments) was sent
    more than once (TOOL_CALLS rows), each with its replica, its session's `rank` among the
    client's sessions, and the `PREVIOUS` columns of the call before it with the same key (null
    for the first). The client is its ip, clientInfo and origin, else its session: its next
    session is its next one at the same origin, and a call to another server is no repeat."""
    client = pl.coalesce(
        pl.concat_str("client_ip", "client_info", pl.col("origin").fill_null(""), separator="|"),
        "session_id",
    )
    clients = sessions.select("session_id", client.alias("client"), "start")
    rank = pl.col("start").rank("ordinal").over("client").alias("rank")
    key = ("client", "server", "tool_name", "arguments_hash")
    same_key = pl.all_horizontal(*(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in key))
    return (
        calls.filter(~pl.col("read_only_hint").fill_null(False))
        .join(clients.with_columns(rank), on="session_id", how="left")
        # Only a key sent twice can repeat (few calls are): the rest skip the replica lookup
        # and the sort.
        .filter(pl.len().over(key) > 1)
        .join(exchanges.select("flow_id", "replica"), on="flow_id", how="left")
        # Each call next to the one before it with the same key: sorted once, each previous
        # value a shift (cheaper than a window per column over the key).
        .sort(*key, "ts", "seq", maintain_order=True)
        .with_columns(
            pl.when(same_key).then(pl.col(c).shift(1)).alias(f"prev_{c}") for c in PREVIOUS
        )
    )


HEADER_PARAMS: Final = pl.Schema({"tool": pl.String, "token": pl.String, "path": pl.String})
"""The columns of `header_params`: a tool, a lowercased `x-mcp-header` token, and the JSONPath
of the argument it mirrors in a `tools/call` body."""


def header_params(payloads: pl.LazyFrame) -> pl.DataFrame:
    """tool, token -> JSONPath of the argument (2026-07-28 `Mcp-Param-<token>` headers), from
    the captured tools/list results among `payloads` (PAYLOADS rows; the same text may recur).

    A Python walk over the few payloads that declare headers, not over traffic rows.
    """
    found: dict[tuple[str, str], str] = {}
    # Select the rows first, then deduplicate the few found (a text recurs across parts).
    texts = (
        payloads.filter(
            ~pl.col("base64") & pl.col("text").str.contains("x-mcp-header", literal=True)
        )
        .unique("data_hash", keep="any")
        .collect()
    )
    for text in texts["text"]:
        try:
            tools = json.loads(text).get("result", {}).get("tools", [])
        except (ValueError, AttributeError):
            continue
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                for token, path in _header_tokens(tool.get("inputSchema")):
                    keys = "".join(f"[{json.dumps(key)}]" for key in path)
                    found[(tool["name"], token)] = f"$.params.arguments{keys}"
    return pl.DataFrame(
        [(tool, token, path) for (tool, token), path in found.items()],
        schema=HEADER_PARAMS,
        orient="row",
    )


def _header_tokens(
    schema: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(lowercased token, property path) of each `x-mcp-header` on a pure `properties` chain."""
    if not isinstance(schema, dict):
        return
    token = schema.get("x-mcp-header")
    if path and isinstance(token, str):
        yield token.lower(), path
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            yield from _header_tokens(sub, (*path, str(name)))
