"""The SESSIONS frame: one row per session key (DESIGN.md §2), with how it ended.

Server: the origin and path of its first flow (the authority and path where the analysis reaches
one origin: `analyzer.timeline.keys`).

End: the first DELETE of the session answered 2xx (`delete`), or the first 404 to a request
carrying its Mcp-Session-Id (`404`), whichever came first; else `capture_end`, at the last
timestamp of the whole capture.
"""

from __future__ import annotations

import polars as pl

from analyzer import schema as S
from analyzer.timeline.keys import ENDPOINT

__all__ = ["sessions"]


def sessions(keyed: pl.LazyFrame, *, streams_of_flows: pl.LazyFrame) -> pl.LazyFrame:
    """The SESSIONS frame."""
    last = pl.max_horizontal("ts", "resp_ts", "end_ts")
    capture_end = keyed.select(last.max().alias("_capture_end"))
    openers = (
        streams_of_flows.filter(pl.col("incarnation") == 0)
        .join(keyed.select("flow_id", "session_id"), on="flow_id")
        .group_by("session_id")
        .agg(pl.len().cast(pl.Int64).alias("streams"))
    )
    ends = (
        keyed.filter(
            ((pl.col("method") == "DELETE") & pl.col("status").is_between(200, 299))
            | ((pl.col("status") == 404) & pl.col("mcp_session_id").is_not_null())
        )
        .with_columns(
            pl.when(pl.col("method") == "DELETE")
            .then(pl.lit("delete"))
            .otherwise(pl.lit("404"))
            .alias("_how"),
            pl.coalesce("resp_ts", "ts").alias("_at"),
        )
        .group_by("session_id")
        .agg(
            pl.col("_how").sort_by("_at").first(),
            pl.col("_at").min(),
            pl.col("flow_id").sort_by("_at").first().alias("end_flow_id"),
        )
    )
    ordered = keyed.sort("ts", "req_seq", nulls_last=True)
    per_session = ordered.group_by("session_id").agg(
        pl.col("session_kind").first().alias("kind"),
        pl.col("era").filter(pl.col("era") != "unknown").mode().sort().first().alias("era"),
        pl.col("client_ip").drop_nulls().first(),
        pl.col("rpc_client_info").drop_nulls().first().alias("client_info"),
        pl.col("client_value").drop_nulls().first(),
        ENDPOINT.drop_nulls().first().alias("server"),
        pl.col("origin").drop_nulls().first(),
        pl.col("ts").min().alias("start"),
        last.max().alias("last_ts"),
        pl.col("initialize").fill_null(False).any().alias("initialized"),
        pl.col("flow_id")
        .filter(pl.col("initialize").fill_null(False))
        .first()
        .alias("init_flow_id"),
        pl.len().cast(pl.Int64).alias("flows"),
    )
    return (
        per_session.join(ends, on="session_id", how="left")
        .join(openers, on="session_id", how="left")
        .join(capture_end, how="cross")
        .with_columns(
            pl.col("era").fill_null("unknown"),
            pl.coalesce("_at", "_capture_end").alias("end_ts"),
            pl.col("_how").fill_null("capture_end").cast(S.SESSION_END).alias("end_how"),
            pl.col("streams").fill_null(0),
        )
        .select(S.SESSIONS.names())
        .sort("session_id")
    )
