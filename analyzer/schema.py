"""The Polars schema of every stage boundary, declared once (STYLE.md §7).

Two layers:

- the *normalized* tables (`RAW_*`, `PAYLOADS`): what normalize derives from capture records and
  what the Parquet cache stores; one row per flow, per SSE event, per JSON-RPC message, per tool
  listed in a `tools/list` result, per distinct payload text;
- the *timeline* frames (`EXCHANGES` ... `SESSIONS`): what detectors read, with every row placed
  in its session, logical stream and incarnation (DESIGN.md §2).

Key columns come first, always in the order `session_id, stream_id, ts, seq` where they apply.
`ts` is the wire time of the record (UTC, ns); `seq` the capture writer's sequence number of that
record (ordering within one capture run; `input` tells which input it came from).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

__all__ = [
    "AFTER_CURSOR",
    "CURSOR_STATUS",
    "DIRECTION",
    "END_HOW",
    "EVENT_DATES",
    "EXCHANGES",
    "ID_COUNTERS",
    "INCARNATIONS",
    "INT32_END",
    "INT64_END",
    "MESSAGES",
    "OUTCOME",
    "PAYLOADS",
    "PLACEMENT",
    "PROGRESS",
    "RAW_EVENTS",
    "RAW_FLOWS",
    "RAW_MESSAGES",
    "RAW_TABLES",
    "RAW_TOOLS",
    "RECURRING_EVENTS",
    "REPLAY_MESSAGES",
    "RESUMED_EVENTS",
    "RESUMED_PROGRESS",
    "RESUMES_AT_CURSOR",
    "RESUMPTIONS",
    "RPC_KIND",
    "RPC_MESSAGES",
    "SESSIONS",
    "SESSION_END",
    "SESSION_KIND",
    "SOURCE",
    "SSE_EVENTS",
    "STREAMS",
    "STREAM_KIND",
    "TIMELINE_FRAMES",
    "TOOL_CALLS",
    "TS",
    "SchemaMismatch",
    "assert_schema",
    "empty",
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

_STR: pl.DataType = pl.String()
_I32: pl.DataType = pl.Int32()
_I64: pl.DataType = pl.Int64()
_BOOL: pl.DataType = pl.Boolean()
_HEADER: pl.DataType = pl.Struct({"name": pl.String(), "value": pl.String()})

# ----------------------------------------------------------------------------------------------
# Normalized tables (the Parquet cache)
# ----------------------------------------------------------------------------------------------

RAW_FLOWS = pl.Schema(
    {
        "flow_id": _STR,
        "run_id": _STR,  # capture run that recorded the flow (synthesized for dumps and HAR)
        "req_ts": TS,
        "req_seq": _I64,
        "method": _STR,
        "scheme": _STR,
        "authority": _STR,
        "path": _STR,  # without the query
        "query": _STR,  # after '?', null when none
        "client_ip": _STR,
        "upstream": _STR,
        "last_event_id": _STR,  # request header Last-Event-ID
        "mcp_session_id": _STR,  # request header Mcp-Session-Id
        "protocol_version": _STR,  # request header MCP-Protocol-Version
        "request_content_type": _STR,
        "client_value": _STR,  # value of the --client-header request header
        "mcp_headers": pl.List(_HEADER),  # Mcp-Method, Mcp-Name, Mcp-Param-* (2026)
        "request_body_hash": _STR,  # key into PAYLOADS
        "request_truncated_bytes": _I64,
        "rpc_kind": RPC_KIND,  # the request body, classified as a whole
        "rpc_id": _STR,  # id of the body's (first) request
        "rpc_method": _STR,  # method of the body's first request or notification
        "initialize": _BOOL,  # the body holds an `initialize` request
        "rpc_client_info": _STR,  # "name/version" from initialize params or 2026 _meta
        "rpc_protocol_version": _STR,  # from initialize params or 2026 _meta
        "result_protocol_version": _STR,  # of the first initialize result the flow carried
        "resp_ts": TS,
        "resp_seq": _I64,
        "status": _I32,
        "content_type": _STR,  # response Content-Type (media type only, lowercase)
        "response_session_id": _STR,  # response header Mcp-Session-Id
        "replica": _STR,
        "replica_source": _STR,  # header | upstream | null
        "streamed": _BOOL,
        "response_body_hash": _STR,
        "response_truncated_bytes": _I64,
        # A response body not wholly in the input: a streamed body a dump did not keep, or
        # one the proxy could not decode (an unknown or broken content coding, its bound).
        "body_missing": _BOOL,
        "end_ts": TS,
        "end_seq": _I64,
        "end_how": END_HOW,
        "end_error": _STR,
        "chunks": _I32,
        "events": _I32,
        "payload_events": _I32,  # events with data (not id-only)
        "first_cursor": _STR,  # first non-empty id issued on this response
        "last_cursor": _STR,  # last id issued on this response (the decoder's last_event_id)
        "last_retry_ms": _I64,  # last retry: field seen on this response
        "tail_bytes": _I64,  # bytes of an unterminated last block (a torn stream)
        "endpoint_url": _STR,  # data of the first `endpoint` event (legacy HTTP+SSE)
        "decompress_capped": _BOOL,
        "unreachable": _STR,  # server_unreachable error text for this flow
    }
)
"""One row per HTTP flow (exchange), before sessions and streams are known."""

RAW_EVENTS = pl.Schema(
    {
        "flow_id": _STR,
        "ts": TS,  # ts of the chunk record that completed the event
        "seq": _I64,  # seq of that chunk record
        "ordinal": _I32,  # 0-based position of the event in its HTTP response
        "chunk_n": _I32,
        "event_id": _STR,  # the `id` field of this block; null when the block set none
        "last_event_id": _STR,  # WHATWG last event ID buffer after the block
        "event": _STR,  # event type ("message" by default)
        "data_hash": _STR,  # key into PAYLOADS; null for id-only events
        "data_bytes": _I32,
        "payload_hash": _STR,  # canonical payload identity; null for id-only events
        "retry": _I64,
        "id_only": _BOOL,
        "comments": _I32,
        "warnings": pl.List(_STR),  # SSE parse warnings; empty list when none
        "payload_seen": _I32,  # events with data in the response up to and including this one
    }
)

RAW_MESSAGES = pl.Schema(
    {
        "flow_id": _STR,
        "ts": TS,
        "seq": _I64,
        "source": SOURCE,
        "ordinal": _I32,  # event ordinal when source is sse, else null
        "member": _I32,  # index in a batch, null when not in a batch
        "event_id": _STR,  # `id` field of the carrying SSE event, null when none / not SSE
        "direction": DIRECTION,
        "kind": RPC_KIND,
        "rpc_id": _STR,  # canonical JSON text of the id: 7 -> "7", "7" -> "\"7\""
        "method": _STR,
        "reason": _STR,  # why invalid (analyzer.jsonrpc.Reason)
        "payload_hash": _STR,  # canonical (RFC 8785) hash of the message; raw bytes if no JSON
        "data_hash": _STR,  # key into PAYLOADS of the whole body or event data carrying it
        "tool_name": _STR,  # tools/call params.name
        "arguments_hash": _STR,  # canonical hash of tools/call params.arguments
        "mrtr_params": _BOOL,  # tools/call params hold inputResponses or requestState
        "input_required": _BOOL,  # result is an MRTR InputRequiredResult
        "is_error": _BOOL,  # result.isError is true
        "error_code": _I64,  # error.code
        "protocol_version": _STR,  # initialize params/result protocolVersion, or 2026 _meta
        "client_info": _STR,  # "name/version" of initialize params.clientInfo or 2026 _meta
        "cancel_id": _STR,  # notifications/cancelled params.requestId (canonical JSON)
        "progress_token": _STR,  # notifications/progress params.progressToken (canonical JSON)
        "progress": pl.Float64(),  # notifications/progress params.progress, when a number
    }
)

RAW_TOOLS = pl.Schema(
    {
        "flow_id": _STR,
        "ts": TS,
        "seq": _I64,
        "rpc_id": _STR,  # id of the response carrying the tools/list result
        "tool_name": _STR,
        "annotated": _BOOL,  # the tool had an `annotations` object
        "read_only_hint": _BOOL,  # as listed; null when absent
        "destructive_hint": _BOOL,
        "idempotent_hint": _BOOL,
        "open_world_hint": _BOOL,
    }
)

PAYLOADS = pl.Schema(
    {
        "data_hash": _STR,  # 16 hex digits of the SHA-256 of the bytes
        "text": _STR,  # the bytes as UTF-8 text, or base64 when `base64`
        "base64": _BOOL,
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

# ----------------------------------------------------------------------------------------------
# Timeline frames (what detectors read)
# ----------------------------------------------------------------------------------------------

EXCHANGES = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,  # logical stream this response carries; null when not an SSE stream
        "ts": TS,  # request ts
        "seq": _I64,  # request seq
        "flow_id": _STR,
        "input": _I32,  # index into Timeline.inputs
        "run_id": _STR,
        "incarnation": _I32,  # incarnation ordinal when stream_id is set
        "era": _STR,  # protocol version string (2024-11-05 ... 2026-07-28) or "unknown"
        "method": _STR,
        "scheme": _STR,
        "authority": _STR,
        "path": _STR,
        "query": _STR,
        "client_ip": _STR,
        "status": _I32,
        "content_type": _STR,
        "request_content_type": _STR,
        "last_event_id": _STR,
        "mcp_session_id": _STR,
        "response_session_id": _STR,
        "protocol_version": _STR,
        "client_value": _STR,
        "mcp_headers": pl.List(_HEADER),
        "rpc_kind": RPC_KIND,
        "rpc_id": _STR,
        "rpc_method": _STR,
        "replica": _STR,
        "replica_source": _STR,
        "response_ts": TS,
        "response_seq": _I64,
        "end_how": END_HOW,
        "end_ts": TS,
        "end_error": _STR,
        "sse": _BOOL,  # 2xx answered with text/event-stream
        "events": _I32,
        "payload_events": _I32,
        "last_cursor": _STR,
        "last_retry_ms": _I64,
        "tail_bytes": _I64,
        "request_body_hash": _STR,
        "response_body_hash": _STR,
        "request_truncated_bytes": _I64,
        "response_truncated_bytes": _I64,
        "body_missing": _BOOL,
        "unreachable": _STR,
    }
)
"""One row per HTTP flow."""

SSE_EVENTS = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,
        "ts": TS,
        "seq": _I64,
        "flow_id": _STR,
        "incarnation": _I32,
        "ordinal": _I32,
        "stream_pos": _I64,  # earlier incarnations' events + ordinal
        "event_id": _STR,
        "last_event_id": _STR,
        "event": _STR,
        "data_hash": _STR,
        "data_bytes": _I32,
        "payload_hash": _STR,
        "retry": _I64,
        "id_only": _BOOL,
        "comments": _I32,
        "warnings": pl.List(_STR),
        "chunk_n": _I32,
    }
)
"""One row per SSE block (id-only priming events included)."""

MESSAGES = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,  # the flow's logical stream (for a POST: the stream it opened)
        "ts": TS,
        "seq": _I64,
        "flow_id": _STR,
        "incarnation": _I32,
        "source": SOURCE,
        "ordinal": _I32,
        "member": _I32,
        "event_id": _STR,
        "direction": DIRECTION,
        "kind": RPC_KIND,
        "rpc_id": _STR,
        "method": _STR,
        "reason": _STR,
        "payload_hash": _STR,
        "data_hash": _STR,
        "tool_name": _STR,
        "arguments_hash": _STR,
        "mrtr_params": _BOOL,
        "input_required": _BOOL,
        "is_error": _BOOL,
        "error_code": _I64,
        "protocol_version": _STR,
        "client_info": _STR,
        "cancel_id": _STR,
        "progress_token": _STR,
        "progress": pl.Float64(),
    }
)
"""One row per JSON-RPC message (batch members split out)."""

STREAMS = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,  # flow id of the opening response
        "ts": TS,  # opening request ts
        "seq": _I64,
        "kind": STREAM_KIND,
        "era": _STR,
        "request_id": _STR,  # id of the request a POST stream answers (first one of a batch)
        "request_method": _STR,
        "stale_cursor": _STR,  # a GET opened with a Last-Event-ID its session never issued
        "incarnations": _I32,
        "events": _I64,
        "payload_events": _I64,
        "response_delivered": _BOOL,  # post streams: response to request_id seen on an incarnation
        "response_incarnation": _I32,
        "response_ts": TS,
        "last_end_how": END_HOW,  # how the last incarnation's HTTP response ended
        "end_ts": TS,
        "replica": _STR,  # of the opening response
    }
)

INCARNATIONS = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,
        "ts": TS,  # request ts
        "seq": _I64,
        "flow_id": _STR,
        "incarnation": _I32,  # 0 for the opening response, then 1, 2, ... by request time
        "base_events": _I64,  # earlier incarnations' events: its events' stream_pos - ordinal
        "cursor": _STR,  # Last-Event-ID that made it an incarnation (null for 0)
        "replica": _STR,
        "status": _I32,
        "response_ts": TS,
        "end_how": END_HOW,
        "end_ts": TS,
        "events": _I32,
        "payload_events": _I32,
        "first_event_id": _STR,
        "last_cursor": _STR,  # last id issued on it
        "last_retry_ms": _I64,
        "delivered_response": _BOOL,  # carried the response to the stream's request
    }
)

RESUMPTIONS = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,  # the stream the cursor resolved to in this session; null otherwise
        "ts": TS,
        "seq": _I64,
        "flow_id": _STR,
        "method": _STR,
        "cursor": _STR,
        "status": CURSOR_STATUS,
        "with_initialize": _BOOL,  # the request carrying the cursor is an initialize
        "cursor_session_id": _STR,  # session that issued it (own, another one, or null)
        "cursor_stream_id": _STR,
        "cursor_flow_id": _STR,
        "cursor_incarnation": _I32,
        "cursor_ts": TS,
        "cursor_replica": _STR,
        "cursor_priming": _BOOL,  # the issuing event was id-only
        "events_after": _I64,  # events the stream carried after the cursor, before this request
        "payload_events_after": _I64,  # of which not id-only
        "response_owed": _BOOL,  # post stream whose response was not delivered before this request
        "answer_status": _I32,
        "answer_sse": _BOOL,
        "answer_stream_id": _STR,  # stream the answer carries (stream_id, or a new stream)
        "answer_incarnation": _I32,
        "answer_replica": _STR,
        "replica_changed": _BOOL,  # null when either replica is unknown
        "answer_events": _I32,
        "answer_payload_events": _I32,
        "answer_end_how": END_HOW,
    }
)
"""One row per request carrying Last-Event-ID."""

TOOL_CALLS = pl.Schema(
    {
        "session_id": _STR,
        "stream_id": _STR,  # the stream the call's POST opened, null when answered otherwise
        "ts": TS,
        "seq": _I64,
        "flow_id": _STR,
        "request_id": _STR,
        "tool_name": _STR,
        "arguments_hash": _STR,
        "era": _STR,
        "server": _STR,  # authority + path of the endpoint
        "mrtr": _BOOL,  # an MRTR leg: inputResponses/requestState, or predecessor input_required
        "first_outcome": OUTCOME,  # what the call's own HTTP exchange gave
        "result_delivered": _BOOL,
        "result_flow_id": _STR,
        "result_incarnation": _I32,  # incarnation of stream_id that delivered it (null if none)
        "result_ts": TS,
        "result_kind": RPC_KIND,  # response | error
        "result_is_error": _BOOL,
        "input_required": _BOOL,
        "cancelled": _BOOL,  # the client sent notifications/cancelled for it
        "tool_listed": _BOOL,  # some tools/list of this server named the tool
        "annotated": _BOOL,
        "read_only_hint": _BOOL,  # from the latest tools/list; spec defaults when listed without
        "destructive_hint": _BOOL,
        "idempotent_hint": _BOOL,
        "open_world_hint": _BOOL,
    }
)

SESSIONS = pl.Schema(
    {
        "session_id": _STR,
        "kind": SESSION_KIND,
        "era": _STR,
        "client_ip": _STR,
        "client_info": _STR,
        "client_value": _STR,
        "server": _STR,
        # `scheme://host:port` the session's server answered at, when the analysis reaches
        # several origins (its key ends with `@<origin>`); null otherwise
        "origin": _STR,
        "start": TS,  # first request of the session in the capture
        "last_ts": TS,  # last record of the session
        "end_ts": TS,
        "end_how": SESSION_END,
        "end_flow_id": _STR,
        "initialized": _BOOL,  # the capture holds its initialize request
        "init_flow_id": _STR,
        "flows": _I64,
        "streams": _I64,
    }
)


# ----------------------------------------------------------------------------------------------
# Derived frames (subsets of the frames above, collected once by `build_timeline`)
# ----------------------------------------------------------------------------------------------


def _pick(base: pl.Schema, names: str, **added: pl.DataType) -> pl.Schema:
    """The columns `names` (space-separated, in this order): those of `added` with their own
    dtype, the others with `base`'s."""
    return pl.Schema({n: added[n] if n in added else base[n] for n in names.split()})


EVENT_DATES = pl.Schema({"flow_id": _STR, "ordinal": _I32, "dated_ts": TS})
"""The wire time given to each event of an input without per-event times (DESIGN.md §2)."""
PLACEMENT = _pick(
    INCARNATIONS,
    "flow_id session_id stream_id incarnation base_events base_payload_events",
    base_payload_events=_I64,
)
"""Each flow's session, stream and incarnation, and the events its stream carried before it."""
RPC_MESSAGES = _pick(
    MESSAGES,
    "session_id stream_id flow_id incarnation ts seq direction kind rpc_id method tool_name"
    " arguments_hash mrtr_params input_required is_error cancel_id source event_id payload_hash"
    " answers answered",
    answers=_STR,
    answered=_BOOL,
)
"""The requests, responses, errors and cancellations of MESSAGES, each answer linked to the
flow of the request it answers (`answers`)."""
RECURRING_EVENTS = _pick(
    SSE_EVENTS,
    "session_id stream_id flow_id incarnation ts seq ordinal event_id event payload_hash",
)
"""The events whose id recurs in their session."""
RESUMED_EVENTS = _pick(
    SSE_EVENTS,
    "stream_id flow_id ts incarnation ordinal stream_pos event_id id_only payload_hash event"
    " data_hash",
)
"""The events of the streams a resume continued."""
REPLAY_MESSAGES = _pick(
    MESSAGES,
    "session_id stream_id flow_id ts seq incarnation ordinal event_id direction payload_hash"
    " data_hash progress_token progress",
)
"""The messages the recurring and resumed events carried."""
ID_COUNTERS = pl.Schema(
    {"stream_id": _STR, "incarnation": _I32, "prefix": _STR, "lo": _I64, "hi": _I64, "n": _I64}
)
"""Per stream, incarnation and id prefix, the lowest, highest and count of its counter ids."""
RESUMES_AT_CURSOR = _pick(
    RESUMPTIONS,
    "stream_id cursor cursor_flow_id r_flow r_ts r_inc answer_status cursor_replica"
    " answer_replica response_owed answer_end_how c_pos",
    r_flow=_STR,
    r_ts=TS,
    r_inc=_I32,
    c_pos=_I64,
)
"""The resumes that became an incarnation of their own stream, placed at their cursor."""
AFTER_CURSOR = _pick(
    pl.Schema({**RESUMES_AT_CURSOR, **RESUMED_EVENTS}),
    " ".join(RESUMES_AT_CURSOR)
    + " ts incarnation stream_pos event_id payload_hash id_last_inc id_last_ts payload_last_inc"
    " payload_last_ts",
    id_last_inc=_I32,
    id_last_ts=TS,
    payload_last_inc=_I32,
    payload_last_ts=TS,
)
"""What the resumed streams carried after each resume's cursor, with where each id and payload
was last seen before."""
RESUMED_PROGRESS = _pick(
    REPLAY_MESSAGES,
    "stream_id incarnation stream_pos ts event_id data_hash progress_token progress",
    stream_pos=_I64,
)
"""The progress notifications on the resumed streams, by stream, token and position."""
PROGRESS = _pick(
    RESUMED_PROGRESS,
    "stream_id incarnation stream_pos ts event_id data_hash token p gid",
    token=_STR,
    p=pl.Float64(),
    gid=pl.UInt32(),
)
"""`RESUMED_PROGRESS` with each (stream, token) numbered in that order (`gid`), `token` the
progress token and `p` its value (`analyzer.timeline.progress`)."""

TIMELINE_FRAMES: Mapping[str, pl.Schema] = {
    "exchanges": EXCHANGES,
    "sse_events": SSE_EVENTS,
    "messages": MESSAGES,
    "streams": STREAMS,
    "incarnations": INCARNATIONS,
    "resumptions": RESUMPTIONS,
    "tool_calls": TOOL_CALLS,
    "sessions": SESSIONS,
    "payloads": PAYLOADS,
}


class SchemaMismatch(AssertionError):
    """A frame's columns or dtypes differ from the declared schema."""


def assert_schema(frame: pl.DataFrame | pl.LazyFrame, expected: pl.Schema) -> None:
    """Raise SchemaMismatch unless `frame` has exactly `expected`'s columns, order and dtypes."""
    actual = frame.collect_schema() if isinstance(frame, pl.LazyFrame) else frame.schema
    if list(actual.items()) == list(expected.items()):
        return
    missing = [name for name in expected if name not in actual]
    extra = [name for name in actual if name not in expected]
    wrong = [
        f"{name}: {actual[name]} != {dtype}"
        for name, dtype in expected.items()
        if name in actual and actual[name] != dtype
    ]
    order = list(actual) != list(expected) and not (missing or extra)
    parts = []
    if missing:
        parts.append(f"missing {missing}")
    if extra:
        parts.append(f"unexpected {extra}")
    if wrong:
        parts.append("dtypes " + "; ".join(wrong))
    if order:
        parts.append(f"order {list(actual)}")
    raise SchemaMismatch(", ".join(parts))


def empty(schema: pl.Schema) -> pl.DataFrame:
    """An empty frame of `schema`."""
    return pl.DataFrame(schema=schema)
