"""The normalized tables: what normalize derives from capture records and the Parquet cache
stores (`analyzer.schema`)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from analyzer.schema.dtypes import (
    BOOL,
    DIRECTION,
    END_HOW,
    HEADER,
    I32,
    I64,
    RPC_KIND,
    SOURCE,
    STR,
    TS,
)

__all__ = [
    "PAYLOADS",
    "RAW_EVENTS",
    "RAW_FLOWS",
    "RAW_MESSAGES",
    "RAW_TABLES",
    "RAW_TOOLS",
]

# ----------------------------------------------------------------------------------------------
# Normalized tables (the Parquet cache)
# ----------------------------------------------------------------------------------------------

RAW_FLOWS = pl.Schema(
    {
        "flow_id": STR,
        "run_id": STR,  # capture run that recorded the flow (synthesized for dumps and HAR)
        "req_ts": TS,
        "req_seq": I64,
        "method": STR,
        "scheme": STR,
        "authority": STR,
        "path": STR,  # without the query
        "query": STR,  # after '?', null when none
        "client_ip": STR,
        "upstream": STR,
        "last_event_id": STR,  # request header Last-Event-ID
        "mcp_session_id": STR,  # request header Mcp-Session-Id
        "protocol_version": STR,  # request header MCP-Protocol-Version
        "request_content_type": STR,
        "client_value": STR,  # value of the --client-header request header
        "mcp_headers": pl.List(HEADER),  # Mcp-Method, Mcp-Name, Mcp-Param-* (2026)
        "request_body_hash": STR,  # key into PAYLOADS
        "request_truncated_bytes": I64,
        "rpc_kind": RPC_KIND,  # the request body, classified as a whole
        "rpc_id": STR,  # id of the body's (first) request
        "rpc_method": STR,  # method of the body's first request or notification
        "initialize": BOOL,  # the body holds an `initialize` request
        "rpc_client_info": STR,  # "name/version" from initialize params or 2026 _meta
        "rpc_protocol_version": STR,  # from initialize params or 2026 _meta
        "result_protocol_version": STR,  # of the first initialize result the flow carried
        "resp_ts": TS,
        "resp_seq": I64,
        "status": I32,
        "content_type": STR,  # response Content-Type (media type only, lowercase)
        "response_session_id": STR,  # response header Mcp-Session-Id
        "replica": STR,
        "replica_source": STR,  # header | upstream | null
        "streamed": BOOL,
        "response_body_hash": STR,
        "response_truncated_bytes": I64,
        # A response body not wholly in the input: a streamed body a dump did not keep, or
        # one the proxy could not decode (an unknown or broken content coding, its bound).
        "body_missing": BOOL,
        "end_ts": TS,
        "end_seq": I64,
        "end_how": END_HOW,
        "end_error": STR,
        "chunks": I32,
        "events": I32,
        "payload_events": I32,  # events with data (not id-only)
        "first_cursor": STR,  # first non-empty id issued on this response
        "last_cursor": STR,  # last id issued on this response (the decoder's last_event_id)
        "last_retry_ms": I64,  # last retry: field seen on this response
        "tail_bytes": I64,  # bytes of an unterminated last block (a torn stream)
        "endpoint_url": STR,  # data of the first `endpoint` event (legacy HTTP+SSE)
        "decompress_capped": BOOL,
        "unreachable": STR,  # server_unreachable error text for this flow
    }
)
"""One row per HTTP flow (exchange), before sessions and streams are known."""

RAW_EVENTS = pl.Schema(
    {
        "flow_id": STR,
        "ts": TS,  # ts of the chunk record that completed the event
        "seq": I64,  # seq of that chunk record
        "ordinal": I32,  # 0-based position of the event in its HTTP response
        "chunk_n": I32,
        "event_id": STR,  # the `id` field of this block; null when the block set none
        "last_event_id": STR,  # WHATWG last event ID buffer after the block
        "event": STR,  # event type ("message" by default)
        "data_hash": STR,  # key into PAYLOADS; null for id-only events
        "data_bytes": I32,
        "payload_hash": STR,  # canonical payload identity; null for id-only events
        "retry": I64,
        "id_only": BOOL,
        "comments": I32,
        "warnings": pl.List(STR),  # SSE parse warnings; empty list when none
        "payload_seen": I32,  # events with data in the response up to and including this one
    }
)

RAW_MESSAGES = pl.Schema(
    {
        "flow_id": STR,
        "ts": TS,
        "seq": I64,
        "source": SOURCE,
        "ordinal": I32,  # event ordinal when source is sse, else null
        "member": I32,  # index in a batch, null when not in a batch
        "event_id": STR,  # `id` field of the carrying SSE event, null when none / not SSE
        "direction": DIRECTION,
        "kind": RPC_KIND,
        "rpc_id": STR,  # canonical JSON text of the id: 7 -> "7", "7" -> "\"7\""
        "method": STR,
        "reason": STR,  # why invalid (analyzer.jsonrpc.Reason)
        "payload_hash": STR,  # canonical (RFC 8785) hash of the message; raw bytes if no JSON
        "data_hash": STR,  # key into PAYLOADS of the whole body or event data carrying it
        "tool_name": STR,  # tools/call params.name
        "arguments_hash": STR,  # canonical hash of tools/call params.arguments
        "mrtr_params": BOOL,  # tools/call params hold inputResponses or requestState
        "input_required": BOOL,  # result is an MRTR InputRequiredResult
        "is_error": BOOL,  # result.isError is true
        "error_code": I64,  # error.code
        "protocol_version": STR,  # initialize params/result protocolVersion, or 2026 _meta
        "client_info": STR,  # "name/version" of initialize params.clientInfo or 2026 _meta
        "cancel_id": STR,  # notifications/cancelled params.requestId (canonical JSON)
        "progress_token": STR,  # notifications/progress params.progressToken (canonical JSON)
        "progress": pl.Float64(),  # notifications/progress params.progress, when a number
    }
)

RAW_TOOLS = pl.Schema(
    {
        "flow_id": STR,
        "ts": TS,
        "seq": I64,
        "rpc_id": STR,  # id of the response carrying the tools/list result
        "tool_name": STR,
        "annotated": BOOL,  # the tool had an `annotations` object
        "read_only_hint": BOOL,  # as listed; null when absent
        "destructive_hint": BOOL,
        "idempotent_hint": BOOL,
        "open_world_hint": BOOL,
    }
)

PAYLOADS = pl.Schema(
    {
        "data_hash": STR,  # 16 hex digits of the SHA-256 of the bytes
        "text": STR,  # the bytes as UTF-8 text, or base64 when `base64`
        "base64": BOOL,
    }
)
"""Distinct payload texts: SSE data, request and response bodies."""

RAW_TABLES: Mapping[str, pl.Schema] = {
    "flows": RAW_FLOWS,
    "events": RAW_EVENTS,
    "messages": RAW_MESSAGES,
    "tools": RAW_TOOLS,
    "payloads": PAYLOADS,
}
"""The normalized tables by name (the Parquet parts of a cache entry, `NormalizedFrames`)."""
