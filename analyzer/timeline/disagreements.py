"""Accepted 2026-07-28 requests whose `Mcp-*` headers disagree with their body: the evidence
`header-mismatch` judges.

What each header must mirror: `Mcp-Method` the body's `method`; `Mcp-Name` its `params.name`
(`tools/call`, `prompts/get`) or `params.uri` (`resources/read`); `Mcp-Param-<token>` the
argument the tool's captured input schema marks `x-mcp-header: <token>`. A header whose body
value is absent is not judged. Values compare after `=?base64?...?=` sentinel decoding, and
numerically when both read as numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from analyzer.timeline.mcp_headers import (
    DECODED,
    PARAM,
    declared_argument,
    header_rows,
    headers_sent,
)

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def accepted(timeline: Timeline) -> pl.LazyFrame | None:
    """One row per session and header name (`name`) that disagreed with a body answered 2xx:
    the first one's `era`, the requests' `flow_ids` and `request_ids`, each one's
    `flow: header value != body value` (`_pairs`), `first_ts` and `last_ts`; None when no
    accepted request carried an `Mcp-*` header."""
    body = pl.col("text")
    accepted = timeline.exchanges.filter(
        pl.col("status").is_between(200, 299) & (pl.col("mcp_headers").list.len() > 0)
    )
    any_header, param_header = headers_sent(accepted)
    if not any_header:
        return None
    param = declared_argument(timeline, wanted=param_header)
    expected = (
        pl.when(pl.col("name") == "mcp-method")
        .then("_method")
        .when(
            (pl.col("name") == "mcp-name") & pl.col("_method").is_in(["tools/call", "prompts/get"])
        )
        .then("_tool")
        .when((pl.col("name") == "mcp-name") & (pl.col("_method") == "resources/read"))
        .then(body.str.json_path_match("$.params.uri"))
        .when(pl.col("name").str.starts_with(PARAM) & (pl.col("_method") == "tools/call"))
        .then(param)
    )
    numbers_equal = pl.col("_decoded").cast(pl.Float64, strict=False) == pl.col("_expected").cast(
        pl.Float64, strict=False
    )
    return (
        header_rows(timeline, accepted)
        .with_columns(expected.alias("_expected"), DECODED.alias("_decoded"))
        .filter(pl.col("_expected").is_not_null())
        .filter(
            pl.col("_decoded").is_null()
            | ((pl.col("_decoded") != pl.col("_expected")) & ~numbers_equal.fill_null(False))
        )
        .sort("ts", "seq")
        .group_by("session_id", "name", maintain_order=True)
        .agg(
            pl.col("era").first(),
            pl.col("flow_id").alias("flow_ids"),
            pl.col("rpc_id").drop_nulls().unique(maintain_order=True).alias("request_ids"),
            pl.format("{}: header {} != body {}", "flow_id", "value", "_expected").alias("_pairs"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
    )
