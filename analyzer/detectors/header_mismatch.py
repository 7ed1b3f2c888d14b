"""2026-07-28 `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers disagreeing with the body, accepted.

In the 2026-07-28 era the request headers mirror the JSON-RPC body so that intermediaries can
route on them: `Mcp-Method` is `method`, `Mcp-Name` is `params.name` (`tools/call`,
`prompts/get`) or `params.uri` (`resources/read`), and `Mcp-Param-<token>` is the argument whose
input-schema property carries `x-mcp-header: <token>` (from a captured `tools/list`). A server
MUST reject a mismatch; flagged is one it answered 2xx (medium: a gateway routed, authorized or
rate-limited on a value the server did not execute). Values are compared after decoding the
`=?base64?...?=` sentinel, so base64-wrapped values that decode equal are not flagged; integer
arguments compare numerically; a header whose body value is absent is not judged, nor an
`Mcp-Param-*` header of a tool whose schema was not captured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit, finding_rows
from analyzer.timeline import payloads_of
from analyzer.timeline.tool_calls import HEADER_PARAMS, header_params

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_SENTINEL: Final = r"^=\?base64\?(.*)\?=$"
_PARAM: Final = "mcp-param-"


def _headers_sent(accepted: pl.LazyFrame) -> tuple[bool, bool]:
    """Whether some accepted request sent MCP headers at all (else there is nothing to compare
    and no body to read: 2025 traffic sends none), and an `Mcp-Param-*` one: only then are the
    tools' declarations wanted (finding them reads the text of every payload: 0.6 s of the
    detector's 0.9 s at 10M events, which send none)."""
    names = pl.col("mcp_headers").explode().struct.field("name").str.to_lowercase()
    sent = accepted.select(
        pl.len() > 0, names.str.starts_with(_PARAM).any().fill_null(False)
    ).collect(engine="streaming")
    return bool(sent[0, 0]), bool(sent[0, 1])


REMEDY: Final = (
    "Servers must validate the Mcp-* headers against the body and answer 400 "
    "(HEADER_MISMATCH); clients should build the headers from the body they send."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per session and header name whose value disagreed with an accepted body."""
    body = pl.col("text")
    method = body.str.json_path_match("$.method")
    tool = body.str.json_path_match("$.params.name")
    accepted = timeline.exchanges.filter(
        pl.col("status").is_between(200, 299) & (pl.col("mcp_headers").list.len() > 0)
    )
    any_header, param_header = _headers_sent(accepted)
    if not any_header:
        return finding_rows([])
    bodies = payloads_of(timeline, accepted.select(pl.col("request_body_hash").alias("data_hash")))
    headers = (
        accepted.select(
            "session_id",
            "ts",
            "seq",
            "flow_id",
            "era",
            "rpc_id",
            "request_body_hash",
            "mcp_headers",
        )
        .explode("mcp_headers")
        .unnest("mcp_headers")
        .with_columns(pl.col("name").str.to_lowercase())
        .join(bodies, left_on="request_body_hash", right_on="data_hash")
        .filter(~pl.col("base64"))
        .with_columns(
            method.alias("_method"),
            tool.alias("_tool"),
            pl.col("name").str.strip_prefix(_PARAM).alias("_token"),
        )
    )
    # One JSONPath per declared argument: a when/then over the few (tool, token) pairs.
    # Finding the declarations reads payload texts: only when an Mcp-Param-* header was sent.
    rows = getattr(timeline, "payload_rows", None)  # the stored rows, else the deduplicated
    texts = timeline.payloads if rows is None else rows
    paths = header_params(texts) if param_header else pl.DataFrame(schema=HEADER_PARAMS)
    param = pl.lit(None, pl.String)
    for tool_name, token, path in paths.iter_rows():
        param = (
            pl.when((pl.col("_tool") == tool_name) & (pl.col("_token") == token))
            .then(body.str.json_path_match(path))
            .otherwise(param)
        )
    expected = (
        pl.when(pl.col("name") == "mcp-method")
        .then("_method")
        .when(
            (pl.col("name") == "mcp-name") & pl.col("_method").is_in(["tools/call", "prompts/get"])
        )
        .then("_tool")
        .when((pl.col("name") == "mcp-name") & (pl.col("_method") == "resources/read"))
        .then(body.str.json_path_match("$.params.uri"))
        .when(pl.col("name").str.starts_with(_PARAM) & (pl.col("_method") == "tools/call"))
        .then(param)
    )
    sentinel = pl.col("value").str.extract(_SENTINEL, 1)
    decoded = (
        pl.when(sentinel.is_not_null())
        .then(sentinel.str.decode("base64", strict=False).cast(pl.String, strict=False))
        .otherwise("value")
    )
    numbers_equal = pl.col("_decoded").cast(pl.Float64, strict=False) == pl.col("_expected").cast(
        pl.Float64, strict=False
    )
    wrong = (
        headers.with_columns(expected.alias("_expected"), decoded.alias("_decoded"))
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
    return emit(
        wrong,
        title=pl.format(
            "{} disagrees with the body of {} accepted request(s)",
            "name",
            pl.col("flow_ids").list.len(),
        ),
        detail=pl.format(
            "Session {}: the server answered 2xx to request(s) whose {} header disagrees "
            "with the JSON-RPC body (after base64-sentinel decoding): {}. Gateways route, "
            "authorize and rate-limit on these headers, so the request was handled on a "
            "value the server did not execute.",
            "session_id",
            "name",
            pl.col("_pairs").list.join("; "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        request_ids="request_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="header-mismatch",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
