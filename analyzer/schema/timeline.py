"""The timeline frames: what detectors read, and the frames derived from them that the
timeline collects once (`analyzer.schema`, `analyzer.timeline.frames`)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from analyzer.schema.dtypes import (
    BOOL,
    CURSOR_STATUS,
    DIRECTION,
    END_HOW,
    HEADER,
    I32,
    I64,
    OUTCOME,
    RPC_KIND,
    SESSION_END,
    SESSION_KIND,
    SOURCE,
    STR,
    STREAM_KIND,
    TS,
)
from analyzer.schema.tables import PAYLOADS

__all__ = [
    "AFTER_CURSOR",
    "EVENT_DATES",
    "EXCHANGES",
    "ID_COUNTERS",
    "INCARNATIONS",
    "MESSAGES",
    "PLACEMENT",
    "PROGRESS",
    "RECURRING_EVENTS",
    "REPLAY_MESSAGES",
    "RESUMED_EVENTS",
    "RESUMED_PROGRESS",
    "RESUMES_AT_CURSOR",
    "RESUMPTIONS",
    "RPC_MESSAGES",
    "SESSIONS",
    "SSE_EVENTS",
    "STREAMS",
    "TIMELINE_FRAMES",
    "TOOL_CALLS",
]

# ----------------------------------------------------------------------------------------------
# Timeline frames (what detectors read)
# ----------------------------------------------------------------------------------------------

EXCHANGES = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,  # logical stream this response carries; null when not an SSE stream
        "ts": TS,  # request ts
        "seq": I64,  # request seq
        "flow_id": STR,
        "input": I32,  # index into Timeline.inputs
        "run_id": STR,
        "incarnation": I32,  # incarnation ordinal when stream_id is set
        "era": STR,  # protocol version string (2024-11-05 ... 2026-07-28) or "unknown"
        "method": STR,
        "scheme": STR,
        "authority": STR,
        "path": STR,
        "query": STR,
        "client_ip": STR,
        "status": I32,
        "content_type": STR,
        "request_content_type": STR,
        "last_event_id": STR,
        "mcp_session_id": STR,
        "response_session_id": STR,
        "protocol_version": STR,
        "client_value": STR,
        "mcp_headers": pl.List(HEADER),
        "rpc_kind": RPC_KIND,
        "rpc_id": STR,
        "rpc_method": STR,
        "replica": STR,
        "replica_source": STR,
        "response_ts": TS,
        "response_seq": I64,
        "end_how": END_HOW,
        "end_ts": TS,
        "end_error": STR,
        "sse": BOOL,  # 2xx answered with text/event-stream
        "events": I32,
        "payload_events": I32,
        "last_cursor": STR,
        "last_retry_ms": I64,
        "tail_bytes": I64,
        "request_body_hash": STR,
        "response_body_hash": STR,
        "request_truncated_bytes": I64,
        "response_truncated_bytes": I64,
        "body_missing": BOOL,
        "unreachable": STR,
    }
)
"""One row per HTTP flow."""

SSE_EVENTS = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,
        "ts": TS,
        "seq": I64,
        "flow_id": STR,
        "incarnation": I32,
        "ordinal": I32,
        "stream_pos": I64,  # earlier incarnations' events + ordinal
        "event_id": STR,
        "last_event_id": STR,
        "event": STR,
        "data_hash": STR,
        "data_bytes": I32,
        "payload_hash": STR,
        "retry": I64,
        "id_only": BOOL,
        "comments": I32,
        "warnings": pl.List(STR),
        "chunk_n": I32,
    }
)
"""One row per SSE block (id-only priming events included)."""

MESSAGES = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,  # the flow's logical stream (for a POST: the stream it opened)
        "ts": TS,
        "seq": I64,
        "flow_id": STR,
        "incarnation": I32,
        "source": SOURCE,
        "ordinal": I32,
        "member": I32,
        "event_id": STR,
        "direction": DIRECTION,
        "kind": RPC_KIND,
        "rpc_id": STR,
        "method": STR,
        "reason": STR,
        "payload_hash": STR,
        "data_hash": STR,
        "tool_name": STR,
        "arguments_hash": STR,
        "mrtr_params": BOOL,
        "input_required": BOOL,
        "is_error": BOOL,
        "error_code": I64,
        "protocol_version": STR,
        "client_info": STR,
        "cancel_id": STR,
        "progress_token": STR,
        "progress": pl.Float64(),
    }
)
"""One row per JSON-RPC message (batch members split out)."""

STREAMS = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,  # flow id of the opening response
        "ts": TS,  # opening request ts
        "seq": I64,
        "kind": STREAM_KIND,
        "era": STR,
        "request_id": STR,  # id of the request a POST stream answers (first one of a batch)
        "request_method": STR,
        "stale_cursor": STR,  # a GET opened with a Last-Event-ID its session never issued
        "incarnations": I32,
        "events": I64,
        "payload_events": I64,
        "response_delivered": BOOL,  # post streams: response to request_id seen on an incarnation
        "response_incarnation": I32,
        "response_ts": TS,
        "last_end_how": END_HOW,  # how the last incarnation's HTTP response ended
        "end_ts": TS,
        "replica": STR,  # of the opening response
    }
)

INCARNATIONS = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,
        "ts": TS,  # request ts
        "seq": I64,
        "flow_id": STR,
        "incarnation": I32,  # 0 for the opening response, then 1, 2, ... by request time
        "base_events": I64,  # earlier incarnations' events: its events' stream_pos - ordinal
        "cursor": STR,  # Last-Event-ID that made it an incarnation (null for 0)
        "replica": STR,
        "status": I32,
        "response_ts": TS,
        "end_how": END_HOW,
        "end_ts": TS,
        "events": I32,
        "payload_events": I32,
        "first_event_id": STR,
        "last_cursor": STR,  # last id issued on it
        "last_retry_ms": I64,
        "delivered_response": BOOL,  # carried the response to the stream's request
    }
)

RESUMPTIONS = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,  # the stream the cursor resolved to in this session; null otherwise
        "ts": TS,
        "seq": I64,
        "flow_id": STR,
        "method": STR,
        "cursor": STR,
        "status": CURSOR_STATUS,
        "with_initialize": BOOL,  # the request carrying the cursor is an initialize
        "cursor_session_id": STR,  # session that issued it (own, another one, or null)
        "cursor_stream_id": STR,
        "cursor_flow_id": STR,
        "cursor_incarnation": I32,
        "cursor_ts": TS,
        "cursor_replica": STR,
        "cursor_priming": BOOL,  # the issuing event was id-only
        "events_after": I64,  # events the stream carried after the cursor, before this request
        "payload_events_after": I64,  # of which not id-only
        "response_owed": BOOL,  # post stream whose response was not delivered before this request
        "answer_status": I32,
        "answer_sse": BOOL,
        "answer_stream_id": STR,  # stream the answer carries (stream_id, or a new stream)
        "answer_incarnation": I32,
        "answer_replica": STR,
        "replica_changed": BOOL,  # null when either replica is unknown
        "answer_events": I32,
        "answer_payload_events": I32,
        "answer_end_how": END_HOW,
    }
)
"""One row per request carrying Last-Event-ID."""

TOOL_CALLS = pl.Schema(
    {
        "session_id": STR,
        "stream_id": STR,  # the stream the call's POST opened, null when answered otherwise
        "ts": TS,
        "seq": I64,
        "flow_id": STR,
        "request_id": STR,
        "tool_name": STR,
        "arguments_hash": STR,
        "era": STR,
        "server": STR,  # authority + path of the endpoint
        "mrtr": BOOL,  # an MRTR leg: inputResponses/requestState, or predecessor input_required
        "first_outcome": OUTCOME,  # what the call's own HTTP exchange gave
        "result_delivered": BOOL,
        "result_flow_id": STR,
        "result_incarnation": I32,  # incarnation of stream_id that delivered it (null if none)
        "result_ts": TS,
        "result_kind": RPC_KIND,  # response | error
        "result_is_error": BOOL,
        "input_required": BOOL,
        "cancelled": BOOL,  # the client sent notifications/cancelled for it
        "tool_listed": BOOL,  # some tools/list of this server named the tool
        "annotated": BOOL,
        "read_only_hint": BOOL,  # from the latest tools/list; spec defaults when listed without
        "destructive_hint": BOOL,
        "idempotent_hint": BOOL,
        "open_world_hint": BOOL,
    }
)

SESSIONS = pl.Schema(
    {
        "session_id": STR,
        "kind": SESSION_KIND,
        "era": STR,
        "client_ip": STR,
        "client_info": STR,
        "client_value": STR,
        "server": STR,
        # `scheme://host:port` the session's server answered at, when the analysis reaches
        # several origins (its key ends with `@<origin>`); null otherwise
        "origin": STR,
        "start": TS,  # first request of the session in the capture
        "last_ts": TS,  # last record of the session
        "end_ts": TS,
        "end_how": SESSION_END,
        "end_flow_id": STR,
        "initialized": BOOL,  # the capture holds its initialize request
        "init_flow_id": STR,
        "flows": I64,
        "streams": I64,
    }
)


# ----------------------------------------------------------------------------------------------
# Derived frames (subsets of the frames above, collected once by `build_timeline`)
# ----------------------------------------------------------------------------------------------


def _pick(base: pl.Schema, names: str, **added: pl.DataType) -> pl.Schema:
    """The columns `names` (space-separated, in this order): those of `added` with their own
    dtype, the others with `base`'s."""
    return pl.Schema({n: added[n] if n in added else base[n] for n in names.split()})


EVENT_DATES = pl.Schema({"flow_id": STR, "ordinal": I32, "dated_ts": TS})
"""The wire time given to each event of an input without per-event times (DESIGN.md §2)."""
PLACEMENT = _pick(
    INCARNATIONS,
    "flow_id session_id stream_id incarnation base_events base_payload_events",
    base_payload_events=I64,
)
"""Each flow's session, stream and incarnation, and the events its stream carried before it."""
RPC_MESSAGES = _pick(
    MESSAGES,
    "session_id stream_id flow_id incarnation ts seq direction kind rpc_id method tool_name"
    " arguments_hash mrtr_params input_required is_error cancel_id source event_id payload_hash"
    " answers answered",
    answers=STR,
    answered=BOOL,
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
    {"stream_id": STR, "incarnation": I32, "prefix": STR, "lo": I64, "hi": I64, "n": I64}
)
"""Per stream, incarnation and id prefix, the lowest, highest and count of its counter ids."""
RESUMES_AT_CURSOR = _pick(
    RESUMPTIONS,
    "stream_id cursor cursor_flow_id r_flow r_ts r_inc answer_status cursor_replica"
    " answer_replica response_owed answer_end_how c_pos",
    r_flow=STR,
    r_ts=TS,
    r_inc=I32,
    c_pos=I64,
)
"""The resumes that became an incarnation of their own stream, placed at their cursor."""
AFTER_CURSOR = _pick(
    pl.Schema({**RESUMES_AT_CURSOR, **RESUMED_EVENTS}),
    " ".join(RESUMES_AT_CURSOR)
    + " ts incarnation stream_pos event_id payload_hash id_last_inc id_last_ts payload_last_inc"
    " payload_last_ts",
    id_last_inc=I32,
    id_last_ts=TS,
    payload_last_inc=I32,
    payload_last_ts=TS,
)
"""What the resumed streams carried after each resume's cursor, with where each id and payload
was last seen before."""
RESUMED_PROGRESS = _pick(
    REPLAY_MESSAGES,
    "stream_id incarnation stream_pos ts event_id data_hash progress_token progress",
    stream_pos=I64,
)
"""The progress notifications on the resumed streams, by stream, token and position."""
PROGRESS = _pick(
    RESUMED_PROGRESS,
    "stream_id incarnation stream_pos ts event_id data_hash token p gid",
    token=STR,
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
