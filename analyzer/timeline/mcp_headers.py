"""The 2026-07-28 `Mcp-*` request headers beside the body they mirror: what `header-mismatch`
compares.

`header_rows` gives one row a header of the accepted requests that sent any, with the request
body's text and the body values a header may name (`_method`, `_tool`, `_token`);
`declared_argument` reads the argument an `Mcp-Param-<token>` header mirrors, as a captured
`tools/list` declares it (`x-mcp-header`); `DECODED` is a header's value after the
`=?base64?...?=` sentinel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.timeline import payloads_of
from analyzer.timeline.tool_calls import HEADER_PARAMS, header_params

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

PARAM: Final = "mcp-param-"
"""The prefix of an `Mcp-Param-<token>` header's lowercased name."""
_SENTINEL: Final = r"^=\?base64\?(.*)\?=$"
_SENT: Final = pl.col("value").str.extract(_SENTINEL, 1)
DECODED: Final = (
    pl.when(_SENT.is_not_null())
    .then(_SENT.str.decode("base64", strict=False).cast(pl.String, strict=False))
    .otherwise("value")
)
"""A header's `value`, its base64 sentinel decoded (null when it does not decode to text)."""


def headers_sent(accepted: pl.LazyFrame) -> tuple[bool, bool]:
    """Whether some `accepted` exchange sent MCP headers at all (else there is nothing to
    compare and no body to read: 2025 traffic sends none), and an `Mcp-Param-*` one: only then
    are the tools' declarations wanted (finding them reads the text of every payload)."""
    names = pl.col("mcp_headers").explode().struct.field("name").str.to_lowercase()
    sent = accepted.select(
        pl.len() > 0, names.str.starts_with(PARAM).any().fill_null(False)
    ).collect(engine="streaming")
    return bool(sent[0, 0]), bool(sent[0, 1])


_KEYS: Final = ("session_id", "ts", "seq", "flow_id", "era", "rpc_id")


def header_rows(timeline: Timeline, accepted: pl.LazyFrame) -> pl.LazyFrame:
    """One row a header of the `accepted` exchanges (`name` lowercased, `value`), with its
    exchange's keys, the request body's `text` (text bodies only), its `_method`, `_tool`
    (`params.name`) and the header's `_token` (the name without `mcp-param-`)."""
    body = pl.col("text")
    bodies = payloads_of(timeline, accepted.select(pl.col("request_body_hash").alias("data_hash")))
    return (
        accepted.select(*_KEYS, "request_body_hash", "mcp_headers")
        .explode("mcp_headers")
        .unnest("mcp_headers")
        .with_columns(pl.col("name").str.to_lowercase())
        .join(bodies, left_on="request_body_hash", right_on="data_hash")
        .filter(~pl.col("base64"))
        .with_columns(
            body.str.json_path_match("$.method").alias("_method"),
            body.str.json_path_match("$.params.name").alias("_tool"),
            pl.col("name").str.strip_prefix(PARAM).alias("_token"),
        )
    )


def declared_argument(timeline: Timeline, *, wanted: bool) -> pl.Expr:
    """The body's argument a row's `Mcp-Param-<_token>` header mirrors for its `_tool`, as a
    captured `tools/list` declares it; null where none does. Declarations are looked for only
    when `wanted` (finding them reads payload texts): one JSONPath per declared argument, a
    when/then over the few (tool, token) pairs."""
    rows = getattr(timeline, "payload_rows", None)  # the stored rows, else the deduplicated
    texts = timeline.payloads if rows is None else rows
    paths = header_params(texts) if wanted else pl.DataFrame(schema=HEADER_PARAMS)
    param = pl.lit(None, pl.String)
    for tool_name, token, path in paths.iter_rows():
        param = (
            pl.when((pl.col("_tool") == tool_name) & (pl.col("_token") == token))
            .then(pl.col("text").str.json_path_match(path))
            .otherwise(param)
        )
    return param
