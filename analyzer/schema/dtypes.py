"""The dtypes the schemas share: timestamps, enums, integer bounds, column types."""

from __future__ import annotations

import polars as pl

__all__ = [
    "BOOL",
    "CURSOR_STATUS",
    "DIRECTION",
    "END_HOW",
    "HEADER",
    "I32",
    "I64",
    "INT32_END",
    "INT64_END",
    "OUTCOME",
    "RPC_KIND",
    "SESSION_END",
    "SESSION_KIND",
    "SOURCE",
    "STR",
    "STREAM_KIND",
    "TS",
]

TS: pl.DataType = pl.Datetime("ns", "UTC")
"""Every timestamp: wall clock of the capturing proxy, ns since the epoch, UTC."""

DIRECTION: pl.DataType = pl.Enum(["c2s", "s2c"])
"""c2s: client to server (request bodies); s2c: server to client (response bodies, SSE)."""
SOURCE: pl.DataType = pl.Enum(["request_body", "response_body", "sse"])
"""Where a JSON-RPC message was carried."""
RPC_KIND: pl.DataType = pl.Enum(
    ["request", "notification", "response", "error", "batch", "invalid"]
)
"""`analyzer.jsonrpc.Kind`; per message never `batch` (batches are split into members)."""
END_HOW: pl.DataType = pl.Enum(
    ["complete", "client_closed", "server_closed", "error", "open_at_shutdown"]
)
"""How the HTTP response ended (`stream_end.how`); null when no stream_end was recorded."""
SESSION_KIND: pl.DataType = pl.Enum(["mcp", "legacy", "anon", "client"])
"""How the session key was recovered (DESIGN.md §2)."""
STREAM_KIND: pl.DataType = pl.Enum(["post", "get"])
"""What opened a logical stream: a POST answered with an event stream, or a GET."""
CURSOR_STATUS: pl.DataType = pl.Enum(["resolved", "other_session", "unresolved"])
"""Where a Last-Event-ID was issued: in its own session, only in another one, or nowhere."""
OUTCOME: pl.DataType = pl.Enum(
    ["delivered", "accepted", "broken", "open", "404", "http_error", "no_response"]
)
"""What the HTTP exchange carrying a request gave: its response delivered on that exchange;
202 with nothing; an event stream that ended (or completed) without the response; one still open
at capture end; 404; another non-2xx status; no HTTP response at all."""
SESSION_END: pl.DataType = pl.Enum(["delete", "404", "capture_end"])
"""How a session ended: a DELETE answered 2xx, a 404 to a request carrying its id, or not at all
before the capture ended."""

INT64_END = 1 << 63
"""The first integer an Int64 column cannot hold (it holds -INT64_END .. INT64_END - 1)."""
INT32_END = 1 << 31
"""The first integer an Int32 column cannot hold."""

STR: pl.DataType = pl.String()
I32: pl.DataType = pl.Int32()
I64: pl.DataType = pl.Int64()
BOOL: pl.DataType = pl.Boolean()
HEADER: pl.DataType = pl.Struct({"name": pl.String(), "value": pl.String()})
