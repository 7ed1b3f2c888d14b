"""Describe payloads: canonical hashes, JSON-RPC message rows and listed tools of a body or an SSE
data buffer (the plain messages nearly all traffic is made of by a fast way, the others by the
reference way).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import orjson

from analyzer import schema as S
from analyzer.canonical import canonical_hash, canonical_json
from analyzer.jsonrpc import Kind, Message, classify_sorted, iter_messages, may_hold_float

# 2026-07-28 request metadata (SEP-2575): every request carries these in params._meta.
_META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
_META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"

# Reasons for which `classify` had no parsed value: the payload is compared as bytes.
_UNPARSED = frozenset(
    {
        "not-utf8",
        "not-json",
        "nan-or-infinity",
        "number-too-long",
        "number-out-of-range",
        "too-deep",
    }
)

MEMO_MAX = 4096  # replays re-send recent events: a small memo catches them
# ---------------------------------------------------------------------------------------------
# Canonical hashing, fast path
# ---------------------------------------------------------------------------------------------

# Key order by code point equals RFC 8785's UTF-16 order unless a key holds a character past
# U+FFFF (4-byte UTF-8 sequences, lead bytes F0-F4); any other character is escaped the same way
# by both encoders.
_ASTRAL = re.compile(rb"[\xf0-\xf4]")
_SORT_KEYS = orjson.OPT_SORT_KEYS


def fast_canonical_hash(value: object) -> str:
    """`canonical_hash(value)`, via orjson when that gives the same text.

    For a value without floats, without ints past 64 bits and without characters past U+FFFF,
    orjson with sorted keys writes exactly the RFC 8785 text (compact, the same string escaping,
    `int.__repr__` numbers, and code-point order equals UTF-16 order); it refuses ints past 64
    bits and lone surrogates, and anything else takes the full `analyzer.canonical` path.
    tests/test_normalize.py checks the equivalence with hypothesis.
    """
    try:
        text = orjson.dumps(value, option=_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return canonical_hash(value)
    if (text.isascii() or _ASTRAL.search(text) is None) and not may_hold_float(text):
        return hashlib.sha256(text).hexdigest()[:16]
    return canonical_hash(value)


def bytes_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def _sorted_hash(value: object, compact: bytes | None, raw: bytes, raw_hash: str) -> str:
    """`fast_canonical_hash(value)`, given `classify_sorted`'s float-free sorted text of it."""
    if compact is None or not (compact.isascii() or _ASTRAL.search(compact) is None):
        return fast_canonical_hash(value)
    if compact == raw:  # the payload was sent in canonical form: one hash serves both
        return raw_hash
    return hashlib.sha256(compact).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Message description
# ---------------------------------------------------------------------------------------------

# (member, kind, rpc_id, method, reason, payload_hash, tool_name, arguments_hash, mrtr_params,
#  input_required, is_error, error_code, protocol_version, client_info, cancel_id,
#  progress_token, progress)
MsgRow = tuple[
    int | None,
    str,
    str | None,
    str | None,
    str | None,
    str,
    str | None,
    str | None,
    bool | None,
    bool | None,
    bool | None,
    int | None,
    str | None,
    str | None,
    str | None,
    str | None,
    float | None,
]
# (rpc_id, tool_name, annotated, read_only, destructive, idempotent, open_world)
ToolRow = tuple[str | None, str, bool, bool | None, bool | None, bool | None, bool | None]


def _client_info(info: object) -> str | None:
    if not isinstance(info, dict):
        return None
    name = info.get("name")
    version = info.get("version")
    if not isinstance(name, str):
        return None
    return f"{name}/{version}" if isinstance(version, str) else name


def json_number(value: object) -> float | None:
    """A JSON number as a finite float; None for anything else: absent, text, a flag, an
    infinity (JSON's 1e400 reads as one), or an integer past the float range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _progress(params: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """A progress notification's token (canonical JSON) and value (when a finite number)."""
    token = params.get("progressToken")
    try:  # the usual token is an int: its canonical JSON is its decimal text
        key = str(token) if type(token) is int else None if token is None else canonical_json(token)
    except (TypeError, ValueError):  # not JSON, or an int too long to write
        key = None
    return key, json_number(params.get("progress"))


def _hint(annotations: Mapping[str, Any], key: str) -> bool | None:
    value = annotations.get(key)
    return value if isinstance(value, bool) else None


def _describe(
    msg: Message, member: int | None, raw_hash: str, payload_hash: str | None = None
) -> tuple[MsgRow, list[ToolRow]]:
    """One message's row (everything but where it was carried) and the tools it lists.

    `payload_hash` is the canonical hash of `msg.value` when the caller has it already.
    """
    kind = msg.kind
    value = msg.value
    if payload_hash is None:
        payload_hash = raw_hash if msg.reason in _UNPARSED else fast_canonical_hash(value)
    tool_name = arguments_hash = protocol_version = client_info = cancel_id = token = None
    progress: float | None = None
    mrtr_params = input_required = is_error = None
    error_code: int | None = None
    tools: list[ToolRow] = []
    if isinstance(value, dict):
        if kind is Kind.REQUEST or kind is Kind.NOTIFICATION:
            params = value.get("params")
            if isinstance(params, dict):
                method = msg.method
                if method == "tools/call":
                    name = params.get("name")
                    tool_name = name if isinstance(name, str) else None
                    if "arguments" in params:
                        arguments_hash = fast_canonical_hash(params["arguments"])
                    mrtr_params = "inputResponses" in params or "requestState" in params
                elif method == "initialize":
                    pv = params.get("protocolVersion")
                    protocol_version = pv if isinstance(pv, str) else None
                    client_info = _client_info(params.get("clientInfo"))
                elif method == "notifications/progress":
                    token, progress = _progress(params)
                elif method == "notifications/cancelled" and "requestId" in params:
                    try:
                        cancel_id = canonical_json(params["requestId"])
                    except (TypeError, ValueError):
                        cancel_id = None
                meta = params.get("_meta")
                if isinstance(meta, dict):
                    if client_info is None and _META_CLIENT_INFO in meta:
                        client_info = _client_info(meta[_META_CLIENT_INFO])
                    pv = meta.get(_META_PROTOCOL_VERSION)
                    if protocol_version is None and isinstance(pv, str):
                        protocol_version = pv
        elif kind is Kind.RESPONSE:
            result = value.get("result")
            if isinstance(result, dict):
                pv = result.get("protocolVersion")
                protocol_version = pv if isinstance(pv, str) else None
                input_required = result.get("resultType") == "input_required" or bool(
                    result.get("inputRequests")
                )
                is_error = result.get("isError") is True
                listed = result.get("tools")
                if isinstance(listed, list):
                    tools = _tools(msg.id, listed)
        elif kind is Kind.ERROR:
            error = value.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                if type(code) is int and -S.INT64_END <= code < S.INT64_END:
                    error_code = code
    row: MsgRow = (
        member,
        kind.value,
        msg.id,
        msg.method,
        msg.reason,
        payload_hash,
        tool_name,
        arguments_hash,
        mrtr_params,
        input_required,
        is_error,
        error_code,
        protocol_version,
        client_info,
        cancel_id,
        token,
        progress,
    )
    return row, tools


def _tools(rpc_id: str | None, listed: list[Any]) -> list[ToolRow]:
    rows: list[ToolRow] = []
    for tool in listed:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        ann = tool.get("annotations")
        if isinstance(ann, dict):
            rows.append(
                (
                    rpc_id,
                    tool["name"],
                    True,
                    _hint(ann, "readOnlyHint"),
                    _hint(ann, "destructiveHint"),
                    _hint(ann, "idempotentHint"),
                    _hint(ann, "openWorldHint"),
                )
            )
        else:
            rows.append((rpc_id, tool["name"], False, None, None, None, None))
    return rows


class Described(NamedTuple):
    """A classified payload: its top-level kind and its rows (memoized by data text).

    A NamedTuple, not a frozen dataclass: built once per payload, and 3x cheaper to build.
    """

    top_kind: str
    result_version: str | None  # protocolVersion of a response among the rows (initialize)
    data_hash: str
    data_bytes: int
    payload_hash: str
    rows: tuple[MsgRow, ...]
    tools: tuple[ToolRow, ...]


# Methods whose params `_describe` reads beyond a progress notification's: left to it.
_DESCRIBED_PARAMS: Final = frozenset({"tools/call", "initialize", "notifications/cancelled"})
_MISSING: Final = object()
_BOM: Final = b"\xef\xbb\xbf"
# The kinds' texts (an enum member's `.value` is a property call).
_REQUEST: Final = Kind.REQUEST.value
_NOTIFICATION: Final = Kind.NOTIFICATION.value
_RESPONSE: Final = Kind.RESPONSE.value


# What `plain_row` reads of a plain message, one column each: the event's carrier columns
# (`data_hash`, `data_bytes`) and its one message row (the others are null: `PLAIN_NULLS`).
PLAIN_COLUMNS: Final = ("kind", "rpc_id", "method", "payload_hash", "data_hash", "data_bytes",
                        "input_required", "is_error", "protocol_version", "progress_token",
                        "progress")  # fmt: skip
PLAIN_NULLS: Final = ("member", "reason", "tool_name", "arguments_hash", "mrtr_params",
                       "error_code", "client_info", "cancel_id")  # fmt: skip
PlainRow = tuple[
    str, str | None, str | None, str, str, int, bool | None, bool | None, str | None,
    str | None, float | None,
]  # fmt: skip
_sha256 = hashlib.sha256


def plain_row(raw: bytes) -> PlainRow | None:
    """The `PLAIN_COLUMNS` of a plain message, else None (see `_describe_plain`).

    One tuple a payload, no other object: this runs once per SSE event of a first analysis.
    """
    if raw.startswith(_BOM):
        return None
    try:
        value = orjson.loads(raw)
        compact = orjson.dumps(value, option=_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    if type(value) is not dict or value.get("jsonrpc") != "2.0" or may_hold_float(compact):
        return None
    if not compact.isascii() and _ASTRAL.search(compact) is not None:
        return None
    raw_id = value.get("id", _MISSING)
    if type(raw_id) is int:
        rpc_id: str | None = int.__repr__(raw_id)
    elif type(raw_id) is str:
        rpc_id = canonical_json(raw_id)
    elif raw_id is _MISSING:
        rpc_id = None
    else:
        return None
    method = value.get("method", _MISSING)
    has_result = "result" in value
    token = protocol_version = None
    progress: float | None = None
    input_required = is_error = None
    if type(method) is str:
        params = value.get("params")
        if has_result or "error" in value or method in _DESCRIBED_PARAMS:
            return None
        if type(params) is dict:
            if "_meta" in params:
                return None
            if method == "notifications/progress":
                token = params.get("progressToken")
                step = params.get("progress")
                # The usual: ints, within 64 bits here (orjson reads longer ones as floats,
                # which are not plain), so `_progress`'s text and float of them directly.
                if type(token) is int and type(step) is int:
                    token, progress = int.__repr__(token), float(step)
                else:
                    token, progress = _progress(params)
        elif params is not None:
            return None
        kind = _REQUEST if rpc_id is not None else _NOTIFICATION
    elif method is not _MISSING or rpc_id is None or not has_result or "error" in value:
        return None
    else:
        kind = _RESPONSE
        method = None
        result = value["result"]
        if type(result) is dict:
            if "tools" in result:
                return None
            pv = result.get("protocolVersion")
            protocol_version = pv if type(pv) is str else None
            input_required = result.get("resultType") == "input_required" or bool(
                result.get("inputRequests")
            )
            is_error = result.get("isError") is True
    raw_hash = _sha256(raw).hexdigest()[:16]
    payload_hash = raw_hash if compact == raw else _sha256(compact).hexdigest()[:16]
    return (kind, rpc_id, method, payload_hash, raw_hash, len(raw), input_required, is_error,
            protocol_version, token, progress)  # fmt: skip


def _describe_plain(raw: bytes) -> Described | None:
    """`describe_payload(raw)` for the messages nearly all traffic is made of, else None.

    Plain: one JSON object of JSON-RPC 2.0 with an int or string id (or none), no float, no
    character past U+FFFF, and nothing `_describe` reads but a progress notification's params
    and a response's result fields (no `_meta`, no listed tools). Everything else, the batches
    and the invalid included, takes the general way, which stays the reference
    (tests/test_normalize.py checks both give the same on random payloads).
    """
    plain = plain_row(raw)
    if plain is None:
        return None
    (kind, rpc_id, method, payload_hash, raw_hash, size, input_required, is_error,
     protocol_version, token, progress) = plain  # fmt: skip
    row: MsgRow = (None, kind, rpc_id, method, None, payload_hash, None, None, None,
                    input_required, is_error, None, protocol_version, None, None, token,
                    progress)  # fmt: skip
    return Described(kind, protocol_version, raw_hash, size, payload_hash, (row,), ())


def describe_payload(raw: bytes, text: str | None = None) -> Described:
    """Classify a body (`raw`) or an SSE data buffer (`text`, with `raw` its UTF-8 bytes)."""
    plain = _describe_plain(raw)
    return describe_general(raw, text) if plain is None else plain


def describe_general(raw: bytes, text: str | None = None) -> Described:
    """`describe_payload` of any payload, the plain ones included (the reference way)."""
    raw_hash = bytes_hash(raw)
    top, compact = classify_sorted(raw if text is None else text)
    if top.reason in _UNPARSED:
        payload_hash = raw_hash
    else:
        payload_hash = _sorted_hash(top.value, compact, raw, raw_hash)
    if top.kind is not Kind.BATCH:
        row, listed = _describe(top, None, raw_hash, payload_hash)
        version = row[12] if row[1] == "response" else None
        return Described(
            top.kind.value, version, raw_hash, len(raw), payload_hash, (row,), tuple(listed)
        )
    rows: list[MsgRow] = []
    tools: list[ToolRow] = []
    for index, member in enumerate(iter_messages(top)):
        row, listed = _describe(member, index, raw_hash)
        rows.append(row)
        tools.extend(listed)
    version = next((r[12] for r in rows if r[1] == "response" and r[12] is not None), None)
    return Described(
        top.kind.value, version, raw_hash, len(raw), payload_hash, tuple(rows), tuple(tools)
    )


# ---------------------------------------------------------------------------------------------
# Column builders
# ---------------------------------------------------------------------------------------------
