"""Session key and era of every flow (DESIGN.md §1, §2).

Session key, tagged by how it was recovered, first match wins:

- `mcp:<id>`: the request's `Mcp-Session-Id`, else the one the response assigned (the
  `initialize` response carries it, and it applies to that exchange too);
- `legacy:<value>`: 2024-11-05 HTTP+SSE; the `session_id=` / `sessionId=` query value of a
  POST, or of the URL in the first `endpoint` event of a GET stream;
- `client:<client ip>|<clientInfo>|<client header value>`: 2026 (sessionless) traffic, with the
  clientInfo of the request's `_meta` (carried over from the client's nearest request when a
  message has none);
- `anon:<client ip>:<initialize flow id>`: a 2025 server without sessions; the flow belongs to
  the latest `initialize` of the same client address before it (`-` when none is captured).

Origin: where a capture run's flows reach more than one origin (a forward proxy, `--mode
regular|upstream:URL`, or a HAR or dump of a client of several servers), each flow's `origin`
is the `scheme://host:port` it went to and its session key ends with `@<origin>`: each server
counts its own sessions (`1`, `2`), and two servers' sessions are two. Everywhere else `origin`
is null and keys are as above: a reverse proxy's run reaches one origin, and runs captured in
front of separate replicas of one server (one origin each) merge into shared sessions.

Era per exchange: its `MCP-Protocol-Version` header; else a 2026 `_meta` protocol version;
else legacy (2024-11-05); else the `protocolVersion` of an initialize result it carried; else
the session's (its initialize result, else its most common header); else "unknown".
"""

from __future__ import annotations

import polars as pl

__all__ = [
    "ENDPOINT",
    "FLOW_TS",
    "KEY_COLUMNS",
    "LEGACY_ERA",
    "ORIGIN",
    "READ_COLUMNS",
    "SESSIONLESS",
    "SESSIONLESS_FROM",
    "key_flows",
]

KEY_COLUMNS = ("ts", "sse", "session_kind", "session_id", "era", "origin")
"""The columns `key_flows` adds to the flows."""

READ_COLUMNS = ("flow_id", "run_id", "req_ts", "req_seq", "scheme", "authority", "query",
                "client_ip", "upstream", "mcp_session_id", "protocol_version", "client_value",
                "rpc_method", "initialize", "rpc_client_info", "rpc_protocol_version",
                "result_protocol_version", "resp_ts", "status", "content_type",
                "response_session_id", "end_ts", "endpoint_url")  # fmt: skip
"""The RAW_FLOWS columns `key_flows` reads (a caller may select those alone first)."""

LEGACY_ERA = "2024-11-05"
SESSIONLESS_FROM = "2026-"
"""Protocol versions from this prefix on (compared as text) are sessionless."""

SESSIONLESS = pl.col("era").str.contains(r"^\d{4}-\d{2}-\d{2}$") & (
    pl.col("era") >= SESSIONLESS_FROM
)
"""A frame's `era` is a sessionless (2026) protocol version: a response belongs to the exchange
that carried it. Null when the era is null."""

FLOW_TS = pl.coalesce("req_ts", "resp_ts", "end_ts")
"""When a flow happened: its request, else (request record lost) its response or end."""

_SESSION_PARAM = r"(?:^|[?&])(?:session_id|sessionId)=([^&#\s]+)"

# An authority `host[:port]`, the host a bracketed IPv6 literal or a name without colons.
_AUTHORITY = r"^(\[[^\]]*\]|[^:\[\]]+)(?::(\d+))?$"
# An upstream address as recorded (`host:port`, `[v6]:port`; HAR: a bare IP).
_UPSTREAM_PORT = r"^(?:\[[^\]]*\]|[^:\[\]]+):(\d+)$"

ORIGIN = pl.concat_str(
    pl.col("scheme").str.to_lowercase(),
    pl.lit("://"),
    pl.coalesce(pl.col("authority").str.extract(_AUTHORITY, 1), "authority").str.to_lowercase(),
    pl.lit(":"),
    # The authority's port, else (the proxy records the Host header's host alone) the port of
    # the upstream address the request went to, else the scheme's default.
    pl.coalesce(
        pl.col("authority").str.extract(_AUTHORITY, 2),
        pl.col("upstream").str.extract(_UPSTREAM_PORT, 1),
        pl.when(pl.col("scheme").str.to_lowercase() == "https")
        .then(pl.lit("443"))
        .when(pl.col("scheme").str.to_lowercase() == "http")
        .then(pl.lit("80")),
    ),
)
"""`scheme://host:port` of the origin a RAW_FLOWS row went to (null without scheme or host)."""


ENDPOINT = pl.concat_str(pl.coalesce("origin", "authority"), "path")
"""A keyed flow's server endpoint: its origin and path, or (one origin) authority and path."""


def _origins(flows: pl.LazyFrame, several: bool | None) -> pl.LazyFrame:
    """The flows with `origin`: the one they went to when some run reaches several (`several`,
    or None: judged over these flows), else null."""
    if several is None:
        told = flows.group_by("run_id").agg(pl.col("_origin").drop_nulls().n_unique().alias("_n"))
        judged = told.select((pl.col("_n") > 1).any().alias("_several"))
    else:
        judged = pl.LazyFrame({"_several": [several]})
    return (
        flows.join(judged, how="cross")
        .with_columns(pl.when(pl.col("_several")).then("_origin").alias("origin"))
        .drop("_origin", "_several")
    )


def key_flows(flows: pl.LazyFrame, several_origins: bool | None = None) -> pl.LazyFrame:
    """RAW_FLOWS (+ input) → the same with `ts, session_kind, session_id, era, sse, origin`
    added. `several_origins`: whether some run of the whole analysis reaches several origins,
    when `flows` are only some of its flows (a Spark bucket's); None: judged over `flows`."""
    base = (
        flows.with_columns(
            FLOW_TS.alias("ts"),
            pl.col("result_protocol_version").alias("_init"),
            ORIGIN.alias("_origin"),
        )
        .pipe(_origins, several_origins)
        .with_columns(
            pl.coalesce("mcp_session_id", "response_session_id").alias("_mcp"),
            pl.coalesce(
                pl.col("endpoint_url").str.extract(_SESSION_PARAM, 1),
                pl.col("query").str.extract(_SESSION_PARAM, 1),
            ).alias("_legacy"),
            # A request's own declared version: the header, else 2026 request metadata (an
            # initialize's params.protocolVersion is only the client's proposal).
            pl.coalesce(
                "protocol_version",
                pl.when(
                    ~pl.col("initialize").fill_null(False)
                    & pl.col("rpc_protocol_version").str.starts_with(SESSIONLESS_FROM)
                ).then("rpc_protocol_version"),
            ).alias("_declared"),
            pl.col("client_ip").fill_null("?").alias("_ip"),
            # What scopes a client's identity and its initialize: one origin's traffic.
            pl.col("origin").fill_null("").alias("_scope"),
            (
                pl.col("status").is_between(200, 299)
                & (pl.col("content_type") == "text/event-stream")
            )
            .fill_null(False)
            .alias("sse"),
        )
        .with_columns(
            pl.when(pl.col("_mcp").is_not_null())
            .then(pl.lit("mcp"))
            .when(pl.col("_legacy").is_not_null())
            .then(pl.lit("legacy"))
            .when(
                (
                    pl.col("_declared").str.contains(r"^\d{4}-\d{2}-\d{2}$")
                    & (pl.col("_declared") >= SESSIONLESS_FROM)
                ).fill_null(False)
                | (pl.col("rpc_method") == "server/discover").fill_null(False)
            )
            .then(pl.lit("client"))
            .otherwise(pl.lit("anon"))
            .alias("session_kind")
        )
    )

    # 2026: the client's identity travels in each request's _meta; notifications may lack it,
    # so carry the nearest one of the same address and client header over.
    sessionless = (
        base.filter(pl.col("session_kind") == "client")
        .sort("ts", "req_seq", nulls_last=True)
        .with_columns(
            pl.col("rpc_client_info")
            .forward_fill()
            .backward_fill()
            .over("_ip", "client_value", "_scope")
            .alias("_client_info")
        )
        .select("flow_id", "_client_info")
    )

    # 2025 without sessions: the latest initialize of the same address at or before the flow.
    anon = base.filter(pl.col("session_kind") == "anon")
    anchors = (
        anon.filter(pl.col("initialize").fill_null(False) & pl.col("ts").is_not_null())
        .select(
            "_ip",
            "_scope",
            pl.col("ts").alias("_anchor_ts"),
            pl.col("flow_id").alias("_init_flow"),
        )
        .sort("_anchor_ts")
    )
    anon_keys = (
        anon.filter(pl.col("ts").is_not_null())
        .select("flow_id", "_ip", "_scope", "ts")
        .sort("ts")
        .join_asof(
            anchors,
            left_on="ts",
            right_on="_anchor_ts",
            by=["_ip", "_scope"],
            strategy="backward",
            check_sortedness=False,  # both sides sorted just above
        )
        .select("flow_id", "_init_flow")
    )

    keyed = (
        base.join(sessionless, on="flow_id", how="left")
        .join(anon_keys, on="flow_id", how="left")
        .with_columns(
            pl.when(pl.col("session_kind") == "mcp")
            .then(pl.concat_str(pl.lit("mcp:"), "_mcp"))
            .when(pl.col("session_kind") == "legacy")
            .then(pl.concat_str(pl.lit("legacy:"), "_legacy"))
            .when(pl.col("session_kind") == "client")
            .then(
                pl.concat_str(
                    pl.lit("client:"),
                    "_ip",
                    pl.lit("|"),
                    pl.col("_client_info").fill_null(""),
                    pl.lit("|"),
                    pl.col("client_value").fill_null(""),
                )
            )
            .otherwise(
                pl.concat_str(
                    pl.lit("anon:"), "_ip", pl.lit(":"), pl.col("_init_flow").fill_null("-")
                )
            )
            .alias("_key"),
            pl.col("session_kind").cast(pl.Enum(["mcp", "legacy", "anon", "client"])),
        )
    )

    keyed = keyed.with_columns(
        pl.when(pl.col("origin").is_null())
        .then("_key")
        .otherwise(pl.concat_str("_key", pl.lit("@"), "origin"))
        .alias("session_id")
    )
    session_era = keyed.group_by("session_id").agg(
        pl.col("_init").sort_by("ts").drop_nulls().first().alias("_init_era"),
        pl.col("_declared").drop_nulls().mode().sort().first().alias("_common_era"),
    )
    return (
        keyed.join(session_era, on="session_id", how="left")
        .with_columns(
            pl.coalesce(
                "_declared",
                pl.when(pl.col("session_kind") == "legacy").then(pl.lit(LEGACY_ERA)),
                "_init",
                "_init_era",
                "_common_era",
                pl.lit("unknown"),
            ).alias("era")
        )
        .drop(
            "_mcp",
            "_legacy",
            "_declared",
            "_ip",
            "_scope",
            "_key",
            "_client_info",
            "_init_flow",
            "_init_era",
            "_common_era",
            "_init",
        )
    )
