"""Normalize: capture records → flows, SSE events, JSON-RPC messages, listed tools, payloads.

Sans-IO (DESIGN.md §3): `Normalizer.add(record)` takes schema-1 record dicts in capture order,
whatever input they came from (captures, mitmproxy dumps and HAR files are all turned into the
same records), and `drain()` hands back column batches as DataFrames of the `analyzer.schema`
`RAW_*` tables. Per flow, the chunk data is fed to one `SseDecoder`, so every event is decoded
exactly as a browser would decode the concatenated stream; an event's `ts` and `seq` are those
of the chunk record that completed it.

This is the per-record hot path of a first analysis (≥200k events/s is the target on two
cores), hence the plain column lists, the bound `append`s and the memo of recently seen `data`.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson
import polars as pl

from analyzer import schema as S
from analyzer.canonical import canonical_hash, canonical_json
from analyzer.jsonrpc import Kind, Message, classify_sorted, iter_messages, may_hold_float
from analyzer.sse import SseDecoder, SseEvent

__all__ = [
    "DEFAULT_BATCH_EVENTS",
    "BulkDescription",
    "NormalizedFrames",
    "Normalizer",
    "SseRun",
    "fast_canonical_hash",
    "json_number",
    "normalize_records",
]

DEFAULT_BATCH_EVENTS = 50_000
"""Events per batch: column lists of Python objects cost ~1.5 KB an event until drained."""

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

_MEMO_MAX = 4096  # replays re-send recent events: a small memo catches them
_json_list = json.JSONEncoder(ensure_ascii=False).encode
_SEEN_PAYLOADS_MAX = 200_000
# Ended flows remembered to tell a later record of one apart (duplicate or late): the most
# recent ones only, so that a Live tail running for days does not grow with every flow. A
# record of a flow that ended longer ago (only a damaged capture has one) starts a flow of its
# own, without a request.
_ENDED_MAX = 100_000

# How `analyzer.capture.framing.ContentDecoder` words a stream it could not decode (the proxy
# records it as the stream's end error; tests/test_normalize.py ties the two together).
DECODE_FAILURE: Final = re.compile(r"content decoding failed|unsupported content-encoding")

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


def _raw_hash(raw: bytes) -> str:
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
_MsgRow = tuple[
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
_ToolRow = tuple[str | None, str, bool, bool | None, bool | None, bool | None, bool | None]


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
) -> tuple[_MsgRow, list[_ToolRow]]:
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
    tools: list[_ToolRow] = []
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
    row: _MsgRow = (
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


def _tools(rpc_id: str | None, listed: list[Any]) -> list[_ToolRow]:
    rows: list[_ToolRow] = []
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


class _Described(NamedTuple):
    """A classified payload: its top-level kind and its rows (memoized by data text).

    A NamedTuple, not a frozen dataclass: built once per payload, and 3x cheaper to build.
    """

    top_kind: str
    result_version: str | None  # protocolVersion of a response among the rows (initialize)
    data_hash: str
    data_bytes: int
    payload_hash: str
    rows: tuple[_MsgRow, ...]
    tools: tuple[_ToolRow, ...]


# Methods whose params `_describe` reads beyond a progress notification's: left to it.
_DESCRIBED_PARAMS: Final = frozenset({"tools/call", "initialize", "notifications/cancelled"})
_MISSING: Final = object()
_BOM: Final = b"\xef\xbb\xbf"
# The kinds' texts (an enum member's `.value` is a property call).
_REQUEST: Final = Kind.REQUEST.value
_NOTIFICATION: Final = Kind.NOTIFICATION.value
_RESPONSE: Final = Kind.RESPONSE.value


# What `_plain` reads of a plain message, one column each: the event's carrier columns
# (`data_hash`, `data_bytes`) and its one message row (the others are null: `_PLAIN_NULLS`).
PLAIN_COLUMNS: Final = ("kind", "rpc_id", "method", "payload_hash", "data_hash", "data_bytes",
                        "input_required", "is_error", "protocol_version", "progress_token",
                        "progress")  # fmt: skip
_PLAIN_NULLS: Final = ("member", "reason", "tool_name", "arguments_hash", "mrtr_params",
                       "error_code", "client_info", "cancel_id")  # fmt: skip
_PlainRow = tuple[
    str, str | None, str | None, str, str, int, bool | None, bool | None, str | None,
    str | None, float | None,
]  # fmt: skip
_sha256 = hashlib.sha256


def _plain(raw: bytes) -> _PlainRow | None:
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


def _describe_plain(raw: bytes) -> _Described | None:
    """`_describe_payload(raw)` for the messages nearly all traffic is made of, else None.

    Plain: one JSON object of JSON-RPC 2.0 with an int or string id (or none), no float, no
    character past U+FFFF, and nothing `_describe` reads but a progress notification's params
    and a response's result fields (no `_meta`, no listed tools). Everything else, the batches
    and the invalid included, takes the general way, which stays the reference
    (tests/test_normalize.py checks both give the same on random payloads).
    """
    plain = _plain(raw)
    if plain is None:
        return None
    (kind, rpc_id, method, payload_hash, raw_hash, size, input_required, is_error,
     protocol_version, token, progress) = plain  # fmt: skip
    row: _MsgRow = (None, kind, rpc_id, method, None, payload_hash, None, None, None,
                    input_required, is_error, None, protocol_version, None, None, token,
                    progress)  # fmt: skip
    return _Described(kind, protocol_version, raw_hash, size, payload_hash, (row,), ())


def _describe_payload(raw: bytes, text: str | None = None) -> _Described:
    """Classify a body (`raw`) or an SSE data buffer (`text`, with `raw` its UTF-8 bytes)."""
    plain = _describe_plain(raw)
    return _describe_general(raw, text) if plain is None else plain


def _describe_general(raw: bytes, text: str | None = None) -> _Described:
    """`_describe_payload` of any payload, the plain ones included (the reference way)."""
    raw_hash = _raw_hash(raw)
    top, compact = classify_sorted(raw if text is None else text)
    if top.reason in _UNPARSED:
        payload_hash = raw_hash
    else:
        payload_hash = _sorted_hash(top.value, compact, raw, raw_hash)
    if top.kind is not Kind.BATCH:
        row, listed = _describe(top, None, raw_hash, payload_hash)
        version = row[12] if row[1] == "response" else None
        return _Described(
            top.kind.value, version, raw_hash, len(raw), payload_hash, (row,), tuple(listed)
        )
    rows: list[_MsgRow] = []
    tools: list[_ToolRow] = []
    for index, member in enumerate(iter_messages(top)):
        row, listed = _describe(member, index, raw_hash)
        rows.append(row)
        tools.extend(listed)
    version = next((r[12] for r in rows if r[1] == "response" and r[12] is not None), None)
    return _Described(
        top.kind.value, version, raw_hash, len(raw), payload_hash, tuple(rows), tuple(tools)
    )


# ---------------------------------------------------------------------------------------------
# Column builders
# ---------------------------------------------------------------------------------------------


def _frame(schema: pl.Schema, columns: Iterable[Sequence[Any]]) -> pl.DataFrame:
    series = []
    for (name, dtype), values in zip(schema.items(), columns, strict=True):
        if dtype == S.TS:
            series.append(pl.Series(name, values, dtype=pl.Int64).cast(S.TS))
        elif isinstance(dtype, pl.List):
            # Nested columns arrive as JSON text (or None for empty): building them from
            # Python lists goes through a slow per-row path in Polars.
            text = pl.Series(name, values, dtype=pl.String)
            if len(text) and text.null_count() == len(text):
                # Every list empty (the usual batch): nothing to decode.
                series.append(pl.Series(name, [[]], dtype=dtype).new_from_index(0, len(text)))
            else:
                series.append(text.fill_null("[]").str.json_decode(dtype).rename(name))
        else:
            series.append(pl.Series(name, values, dtype=dtype))
    return pl.DataFrame(series)


class _Columns:
    """Column lists for one table, flushed to a DataFrame of its schema."""

    __slots__ = ("cols", "schema")

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self.cols: dict[str, list[Any]] = {name: [] for name in schema}

    def __len__(self) -> int:
        return len(next(iter(self.cols.values())))

    def appenders(self) -> tuple[Callable[[Any], None], ...]:
        return tuple(column.append for column in self.cols.values())

    def frame(self) -> pl.DataFrame:
        return _frame(self.schema, self.cols.values())

    def take(self) -> pl.DataFrame:
        frame = self.frame()
        for column in self.cols.values():
            column.clear()
        return frame


class _Rows:
    """Row tuples for one table (one `append` a row: the per-event tables), as a DataFrame."""

    __slots__ = ("append", "rows", "schema")

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []
        self.append = self.rows.append

    def __len__(self) -> int:
        return len(self.rows)

    def take(self) -> pl.DataFrame:
        # Polars takes the transposed tuples as they are: no list copy of each column.
        columns: list[Sequence[Any]] = list(zip(*self.rows, strict=True)) or [
            [] for _ in self.schema
        ]
        self.rows.clear()
        return _frame(self.schema, columns)


@dataclass(frozen=True)
class NormalizedFrames:
    """The normalized tables of some records (see `analyzer.schema`)."""

    flows: pl.DataFrame
    events: pl.DataFrame
    messages: pl.DataFrame
    tools: pl.DataFrame
    payloads: pl.DataFrame

    @staticmethod
    def concat(parts: Iterable[NormalizedFrames]) -> NormalizedFrames:
        parts = list(parts)
        tables = {}
        for name, table_schema in S.RAW_TABLES.items():
            frames = [getattr(part, name) for part in parts]
            tables[name] = pl.concat(frames) if frames else S.empty(table_schema)
        tables["payloads"] = tables["payloads"].unique(
            "data_hash", keep="first", maintain_order=True
        )
        return NormalizedFrames(**tables)


# ---------------------------------------------------------------------------------------------
# Per-flow state
# ---------------------------------------------------------------------------------------------

_MCP_HEADER_PREFIXES = ("mcp-method", "mcp-name", "mcp-param-")


def _media_type(value: str | None) -> str | None:
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower()


def _client_ip(address: str | None) -> str | None:
    if not address:
        return None
    if address.startswith("["):  # [v6]:port
        return address[1 : address.find("]")] if "]" in address else address
    host, sep, port = address.rpartition(":")
    if not sep or ":" in host or not port.isdigit():
        return address  # no port, or a bare IPv6 address
    return host


def _idle(decoder: SseDecoder | None) -> bool:
    return decoder is None or decoder.idle


class _Flow:
    """What normalize knows of one HTTP flow so far."""

    __slots__ = (
        "body_missing",
        "capped",
        "chunks",
        "client_ip",
        "client_value",
        "content_type",
        "decoder",
        "end_error",
        "end_how",
        "end_seq",
        "end_ts",
        "endpoint_url",
        "events",
        "first_cursor",
        "flow_id",
        "has_request",
        "has_response",
        "initialize",
        "last_cursor",
        "last_retry",
        "mcp_headers",
        "next_n",
        "path",
        "payload_events",
        "query",
        "replica",
        "replica_source",
        "req",
        "request_body_hash",
        "request_truncated",
        "resp_seq",
        "resp_ts",
        "response_body_hash",
        "response_session_id",
        "response_truncated",
        "result_version",
        "rpc",
        "run_id",
        "status",
        "streamed",
        "tail_bytes",
        "undecoded",
        "unreachable",
    )

    def __init__(self, flow_id: str, run_id: str | None) -> None:
        self.flow_id = flow_id
        self.run_id = run_id
        self.has_request = False
        self.has_response = False
        # request: (req_ts, req_seq, method, scheme, authority, upstream, last_event_id,
        #           mcp_session_id, protocol_version, request_content_type)
        self.req: tuple[Any, ...] = (None,) * 10
        self.path: str | None = None
        self.query: str | None = None
        self.client_ip: str | None = None
        self.client_value: str | None = None
        self.mcp_headers: str | None = None  # JSON text of [{name, value}]
        self.request_body_hash: str | None = None
        self.request_truncated: int | None = None
        # (rpc_kind, rpc_id, rpc_method, rpc_client_info, rpc_protocol_version)
        self.rpc: tuple[str | None, str | None, str | None, str | None, str | None] = (None,) * 5
        self.initialize: bool | None = None
        self.resp_ts: int | None = None
        self.resp_seq: int | None = None
        self.result_version: str | None = None
        self.status: int | None = None
        self.content_type: str | None = None
        self.response_session_id: str | None = None
        self.replica: str | None = None
        self.replica_source: str | None = None
        self.streamed: bool | None = None
        self.response_body_hash: str | None = None
        self.response_truncated: int | None = None
        self.body_missing: bool | None = None
        self.end_ts: int | None = None
        self.end_seq: int | None = None
        self.end_how: str | None = None
        self.end_error: str | None = None
        self.decoder: SseDecoder | None = None
        self.next_n = 0
        self.chunks = 0
        self.events = 0
        self.payload_events = 0
        self.first_cursor: str | None = None
        self.last_cursor: str | None = None
        self.last_retry: int | None = None
        self.tail_bytes: int | None = None
        self.endpoint_url: str | None = None
        self.capped: bool | None = None
        self.undecoded = False  # the proxy could not undo the response's content coding
        self.unreachable: str | None = None


# ---------------------------------------------------------------------------------------------
# The normalizer
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SseRun:
    """Chunk records of one flow, consecutive in its records, whose text is whole plain events
    that `analyzer.ingest.bulk` decoded: what they change in the flow's state."""

    first_n: int
    chunks: int
    events: int
    payload_events: int
    first_cursor: str | None  # the first non-empty `id` the run set
    last_id: str | None  # the last `id` the run set; None when it set none
    result_version: str | None  # of the first initialize result among its messages


@dataclass(frozen=True, slots=True)
class BulkDescription:
    """`describe_data` of a list of SSE data buffers (type "message"), keyed by `event`, the
    buffer's index in the list."""

    carried: pl.DataFrame  # `_CARRIED`: one row a non-empty buffer
    messages: pl.DataFrame  # `event`, then RAW_MESSAGES from member on
    tools: pl.DataFrame  # `event`, then RAW_TOOLS from rpc_id on


_BULK_MESSAGE_COLUMNS = ("member", "kind", "rpc_id", "method", "reason", "payload_hash",
                         "data_hash", *list(S.RAW_MESSAGES)[14:])  # fmt: skip
_BULK_TOOL_COLUMNS = list(S.RAW_TOOLS)[3:]
_EVENT: Final = ("event", pl.Int64())
_BULK_MESSAGE_SCHEMA: Final = pl.Schema(
    [_EVENT, *((name, S.RAW_MESSAGES[name]) for name in _BULK_MESSAGE_COLUMNS)]
)
_BULK_TOOL_SCHEMA: Final = pl.Schema(
    [_EVENT, *((name, S.RAW_TOOLS[name]) for name in _BULK_TOOL_COLUMNS)]
)
# What an event's data gives the event itself (`result_version`: of an initialize result).
_CARRIED: Final = pl.Schema(
    [
        _EVENT,
        ("data_hash", S.RAW_EVENTS["data_hash"]),
        ("data_bytes", pl.Int64()),
        ("payload_hash", S.RAW_EVENTS["payload_hash"]),
        ("result_version", pl.String()),
    ]
)
_PLAIN_SCHEMA: Final = pl.Schema(
    [
        (name, pl.Int64() if name == "data_bytes" else _BULK_MESSAGE_SCHEMA[name])
        for name in PLAIN_COLUMNS
    ]
)


def _plain_frame(at: list[int], rows: list[_PlainRow]) -> pl.DataFrame:
    """The plain messages' columns: `_CARRIED` and `_BULK_MESSAGE_SCHEMA` both."""
    columns = zip(*rows, strict=True) if rows else ([] for _ in PLAIN_COLUMNS)
    frame = pl.DataFrame(
        [
            pl.Series(name, values, dtype)
            for (name, dtype), values in zip(_PLAIN_SCHEMA.items(), columns, strict=True)
        ]
    )
    return frame.with_columns(
        pl.Series("event", at, pl.Int64),
        pl.col("protocol_version").alias("result_version"),
        *(pl.lit(None, _BULK_MESSAGE_SCHEMA[name]).alias(name) for name in _PLAIN_NULLS),
    )


class _General(NamedTuple):
    carried: pl.DataFrame
    messages: pl.DataFrame
    tools: pl.DataFrame


def _general_frames(at: list[int], described: list[_Described]) -> _General:
    """The frames of `BulkDescription` for payloads described the general way."""
    carried = _frame(
        _CARRIED,
        [
            at,
            [d.data_hash for d in described],
            [d.data_bytes for d in described],
            [d.payload_hash for d in described],
            [d.result_version for d in described],
        ],
    )
    pairs = list(zip(at, described, strict=True))
    rows = [row for _, d in pairs for row in d.rows]
    # A message row is all of `_BULK_MESSAGE_COLUMNS` but the carrier's `data_hash`.
    row_columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) or [
        () for _ in range(len(_BULK_MESSAGE_COLUMNS) - 1)
    ]
    messages: list[Sequence[Any]] = [
        [i for i, d in pairs for _ in d.rows],
        *row_columns[:6],
        [d.data_hash for _, d in pairs for _ in d.rows],
        *row_columns[6:],
    ]
    listed = [(i, tool) for i, d in pairs for tool in d.tools]
    tools: list[Sequence[Any]] = [[i for i, _ in listed]]
    tools.extend(
        zip(*(tool for _, tool in listed), strict=True)
        if listed
        else ([] for _ in _BULK_TOOL_COLUMNS)
    )
    return _General(
        carried, _frame(_BULK_MESSAGE_SCHEMA, messages), _frame(_BULK_TOOL_SCHEMA, tools)
    )


class Normalizer:
    """Turns schema-1 record dicts into the normalized tables, batch by batch.

    Records must come in capture order per flow (request, response, chunks by `n`, stream_end);
    flows may interleave. Damage it meets is counted in `counts` (duplicate_record, chunk_gap,
    late_record) and the record skipped. A flow's row is written at its stream_end, or by
    `finish()` for flows the input left open. Records that are not capture schema 1 but that
    dump and HAR readers synthesize: `response.body_missing` (a body the dump did not keep).
    """

    def __init__(
        self,
        *,
        replica_header: str | None = None,
        client_header: str | None = None,
        batch_events: int = DEFAULT_BATCH_EVENTS,
    ) -> None:
        self.replica_header = replica_header.lower() if replica_header else None
        self.client_header_override = client_header.lower() if client_header else None
        self.client_header = self.client_header_override
        self.run_id: str | None = None
        self.batch_events = batch_events
        self.counts: Counter[str] = Counter()
        self.records = 0
        self._flows: dict[str, _Flow] = {}
        self._ended: dict[str, int] = {}  # flow id -> chunks taken, for flows already written
        self._flow_cols = _Columns(S.RAW_FLOWS)
        self._event_cols = _Rows(S.RAW_EVENTS)
        self._message_cols = _Rows(S.RAW_MESSAGES)
        self._tool_cols = _Columns(S.RAW_TOOLS)
        self._payload_cols = _Columns(S.PAYLOADS)
        self._ev = self._event_cols.append
        self._msg = self._message_cols.append
        self._tool = self._tool_cols.appenders()
        self._payload = self._payload_cols.appenders()
        self._seen_payloads: set[str] = set()
        self._memo: dict[str, _Described] = {}
        self._bulk_memo: dict[str, _PlainRow | _Described] = {}
        self._bulk: dict[str, list[pl.DataFrame]] = {
            "events": [],
            "messages": [],
            "tools": [],
            "payloads": [],
        }
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "capture_open": self._capture_open,
            "request": self._request,
            "response": self._response,
            "chunk": self._chunk,
            "stream_end": self._stream_end,
            "server_unreachable": self._server_unreachable,
        }

    # -- input ------------------------------------------------------------------------------

    def add(self, record: dict[str, Any]) -> None:
        """Take one record (already checked to be well-formed schema 1)."""
        handler = self._handlers.get(record["kind"])
        self.records += 1
        if handler is not None:
            handler(record)

    def add_all(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.add(record)

    def pending_events(self) -> int:
        return len(self._event_cols) + sum(frame.height for frame in self._bulk["events"])

    # -- the bulk lane (analyzer.ingest.bulk) -------------------------------------------------

    def describe_data(self, datas: Sequence[str]) -> BulkDescription:
        """What `_event` derives from the data of "message" events, for many at once; an
        empty buffer (an id-only event) has no payload.

        The plain messages (`_plain`: nearly all) give one tuple each, turned into columns at
        once; the others are described the general way, row by row.
        """
        memo = self._bulk_memo
        plain_at: list[int] = []
        plain_rows: list[_PlainRow] = []
        other_at: list[int] = []
        others: list[_Described] = []
        for index, data in enumerate(datas):
            if not data:
                continue
            found = memo.get(data)
            if found is None:
                raw = data.encode("utf-8", "surrogatepass")
                found = _plain(raw) or _describe_general(raw, data)
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                memo[data] = found
            if isinstance(found, _Described):
                other_at.append(index)
                others.append(found)
            else:
                plain_at.append(index)
                plain_rows.append(found)
        plain = _plain_frame(plain_at, plain_rows)
        general = _general_frames(other_at, others)
        carried = pl.concat(
            [
                plain.select(_CARRIED.names()),
                general.carried,
            ]
        ).sort("event")
        messages = pl.concat([plain.select(_BULK_MESSAGE_SCHEMA.names()), general.messages]).sort(
            "event", maintain_order=True
        )
        return BulkDescription(carried, messages, general.tools)

    def take_run(self, flow_id: str, run: SseRun) -> tuple[int, int, str] | None:
        """Take a run of chunk records decoded in bulk: the flow's (events, payload events,
        last event ID) before it, or None when the flow is not where the run can start (a
        block open in its decoder, a chunk missing or repeated, the flow ended): then the
        run's records go through `add_chunk`, as any other."""
        flow = self._flows.get(flow_id)
        if flow is None and flow_id in self._ended:
            return None
        if flow is not None and (flow.next_n != run.first_n or not _idle(flow.decoder)):
            return None
        if flow is None:
            if run.first_n != 0:
                return None
            flow = self._flows[flow_id] = _Flow(flow_id, self.run_id)
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        before = (flow.events, flow.payload_events, decoder.last_event_id)
        last = before[2] if run.last_id is None else run.last_id
        decoder.skip(last)
        self.records += run.chunks
        flow.next_n = run.first_n + run.chunks
        flow.chunks += run.chunks
        flow.events += run.events
        flow.payload_events += run.payload_events
        if run.events:
            flow.last_cursor = last
        if flow.first_cursor is None and run.first_cursor:
            flow.first_cursor = run.first_cursor
        if flow.result_version is None:
            flow.result_version = run.result_version
        return before

    def add_frames(self, events: pl.DataFrame, messages: pl.DataFrame, tools: pl.DataFrame) -> None:
        """Rows the bulk lane made, of RAW_EVENTS, RAW_MESSAGES and RAW_TOOLS."""
        self._bulk["events"].append(events)
        self._bulk["messages"].append(messages)
        self._bulk["tools"].append(tools)

    def add_payloads(self, payloads: pl.DataFrame) -> None:
        """Payload texts (`data_hash`, `text`: SSE data) of bulk-lane events, stored once each."""
        distinct = payloads.unique("data_hash", keep="first", maintain_order=True)
        seen = self._seen_payloads
        hashes = distinct["data_hash"].to_list()
        fresh = distinct.filter(pl.Series([h not in seen for h in hashes], dtype=pl.Boolean))
        seen.update(hashes)
        self._bulk["payloads"].append(fresh.with_columns(pl.lit(False).alias("base64")))

    def _with_bulk(self, table: str, frame: pl.DataFrame) -> pl.DataFrame:
        parts = self._bulk[table]
        if not parts:
            return frame
        merged = pl.concat([frame, *parts])
        parts.clear()
        return merged

    def drain(self) -> NormalizedFrames:
        """The rows so far: ended flows, events, messages, tools and payloads."""
        if len(self._seen_payloads) > _SEEN_PAYLOADS_MAX:
            self._seen_payloads.clear()
        return NormalizedFrames(
            flows=self._flow_cols.take(),
            events=self._with_bulk("events", self._event_cols.take()),
            messages=self._with_bulk("messages", self._message_cols.take()),
            tools=self._with_bulk("tools", self._tool_cols.take()),
            payloads=self._with_bulk("payloads", self._payload_cols.take()),
        )

    def finish(self) -> NormalizedFrames:
        """End every flow (open streams included) and return what remains, flows included."""
        for flow in self._flows.values():
            if flow.decoder is not None:
                self._close_decoder(flow)
            self._flow_row(flow)
        self._flows.clear()
        return self.drain()

    def snapshot(self) -> pl.DataFrame:
        """Rows of the flows still open, as `finish()` would write them now; nothing ends.

        For a reader that follows a growing capture (`analyzer.ingest.tail`): open streams show
        their events so far while the normalizer goes on taking their records.
        """
        held = self._flow_cols
        self._flow_cols = _Columns(S.RAW_FLOWS)
        try:
            for flow in self._flows.values():
                view = copy.copy(flow)
                if view.decoder is not None:
                    # What `_close_decoder` records; `flush()` leaves `tail` as it is.
                    tail = view.decoder.tail
                    view.tail_bytes = len(tail) if tail else None
                    view.decoder = None
                self._flow_row(view)
            return self._flow_cols.take()
        finally:
            self._flow_cols = held

    # -- records ----------------------------------------------------------------------------

    def set_run(self, run_id: str | None, client_header: str | None) -> None:
        """Records that follow belong to this capture run (recorded with this client header)."""
        self.run_id = run_id
        self.client_header = self.client_header_override or (
            client_header.lower() if client_header else None
        )

    def _capture_open(self, record: dict[str, Any]) -> None:
        header = record.get("client_header")
        self.set_run(record.get("run_id"), header if isinstance(header, str) else None)

    def _flow(self, flow_id: str) -> _Flow | None:
        """The flow's state; None once its stream_end was taken (its row is out)."""
        flow = self._flows.get(flow_id)
        if flow is None:
            if flow_id in self._ended:
                return None
            flow = self._flows[flow_id] = _Flow(flow_id, self.run_id)
        return flow

    def _request(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None or flow.has_request:
            self.counts["duplicate_record"] += 1
            return
        flow.has_request = True
        last_event_id = session = version = ctype = client_value = None
        mcp_headers: list[dict[str, str]] | None = None
        client_header = self.client_header
        for name, value in record["headers"]:
            lname = name.lower()
            if lname == "last-event-id":
                last_event_id = value
            elif lname == "mcp-session-id":
                session = value
            elif lname == "mcp-protocol-version":
                version = value
            elif lname == "content-type":
                ctype = _media_type(value)
            elif lname.startswith(_MCP_HEADER_PREFIXES):
                if mcp_headers is None:
                    mcp_headers = []
                mcp_headers.append({"name": name, "value": value})
            if client_header is not None and lname == client_header:
                client_value = value
        flow.client_value = client_value
        flow.mcp_headers = _json_list(mcp_headers) if mcp_headers else None
        path, _, query = record["path"].partition("?")
        flow.path = path
        flow.query = query or None
        flow.client_ip = _client_ip(record.get("client"))
        flow.req = (
            record["ts_ns"],
            record["seq"],
            record["method"],
            record.get("scheme"),
            record.get("authority"),
            record.get("upstream"),
            last_event_id,
            session,
            version,
            ctype,
        )
        body = record.get("body")
        if body is not None:
            raw, flow.request_body_hash, flow.request_truncated = self._body(body)
            if raw:
                self._body_messages(flow, raw, record, "request_body", "c2s", request=True)

    def _response(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None or flow.has_response:
            self.counts["duplicate_record"] += 1
            return
        flow.has_response = True
        flow.resp_ts = record["ts_ns"]
        flow.resp_seq = record["seq"]
        flow.status = record["status"]
        ctype = session = override = None
        replica_header = self.replica_header
        for name, value in record["headers"]:
            lname = name.lower()
            if lname == "content-type":
                ctype = _media_type(value)
            elif lname == "mcp-session-id":
                session = value
            if replica_header is not None and lname == replica_header and override is None:
                override = value
        flow.content_type = ctype
        flow.response_session_id = session
        if override is not None:
            flow.replica, flow.replica_source = override, "header"
        else:
            flow.replica = record.get("replica")
            flow.replica_source = record.get("replica_source")
        streamed = bool(record.get("streamed"))
        flow.streamed = streamed
        flow.body_missing = bool(record.get("body_missing")) or None
        body = record.get("body")
        if body is not None:
            raw, flow.response_body_hash, flow.response_truncated = self._body(body)
            flow.undecoded = bool(body.get("decode_error"))
            if raw and ctype is not None and "json" in ctype:
                self._body_messages(flow, raw, record, "response_body", "s2c", request=False)
            elif raw and ctype == "text/event-stream":
                # A buffered (not streamed) event stream: decode it as one chunk.
                self._feed(flow, raw, record["ts_ns"], record["seq"], -1)
                self._close_decoder(flow)

    def add_chunk(
        self,
        flow_id: str,
        n: int,
        data: Mapping[str, Any],
        ts: int,
        seq: int,
        capped: object,
    ) -> None:
        """`add` of a well-formed chunk record, given its fields (a reader's fast lane)."""
        self.records += 1
        self._take_chunk(flow_id, n, data, ts, seq, capped)

    def _chunk(self, record: dict[str, Any]) -> None:
        self._take_chunk(
            record["flow"],
            record["n"],
            record["data"],
            record["ts_ns"],
            record["seq"],
            record.get("decompress_capped"),
        )

    def _take_chunk(
        self, flow_id: str, n: int, data: Mapping[str, Any], ts: int, seq: int, capped: object
    ) -> None:
        flow = self._flow(flow_id)
        if flow is None:
            self.counts["duplicate_record" if n < self._ended[flow_id] else "late_record"] += 1
            return
        if n < flow.next_n:
            self.counts["duplicate_record"] += 1
            return
        if n > flow.next_n:
            self.counts["chunk_gap"] += n - flow.next_n
        flow.next_n = n + 1
        flow.chunks += 1
        if capped:
            flow.capped = True
        withheld = data.get("truncated_bytes")
        if withheld:
            # Bytes of an oversized event that the proxy did not record (it redacts events
            # whole, up to a bound): part of the response is not in the capture.
            flow.response_truncated = (flow.response_truncated or 0) + withheld
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        text = data.get("text")
        if text is not None:
            events = decoder.feed_text(text)
        else:
            events = decoder.feed(base64.b64decode(data.get("b64") or ""))
        for event in events:
            self._event(flow, event, ts, seq, n)

    def _stream_end(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None:
            self.counts["duplicate_record"] += 1
            return
        flow.end_ts = record["ts_ns"]
        flow.end_seq = record["seq"]
        flow.end_how = record["how"]
        flow.end_error = error = record.get("error")
        if isinstance(error, str) and DECODE_FAILURE.search(error):
            flow.undecoded = True
        if flow.decoder is not None:
            self._close_decoder(flow)
        # Every flow of a capture ends with its stream_end: write its row now, so that memory
        # holds open flows only; keep what tells later records apart (duplicate or late).
        self._flow_row(flow)
        del self._flows[flow.flow_id]
        ended = self._ended
        ended[flow.flow_id] = flow.next_n
        if len(ended) > _ENDED_MAX:
            del ended[next(iter(ended))]  # the earliest ended

    def _server_unreachable(self, record: dict[str, Any]) -> None:
        flow_id = record.get("flow")
        if isinstance(flow_id, str):
            flow = self._flow(flow_id)
            if flow is None:
                self.counts["late_record"] += 1
            else:
                flow.unreachable = record.get("error") or "unreachable"
        else:
            self.counts["server_unreachable"] += 1

    # -- bodies -----------------------------------------------------------------------------

    def _body(self, body: Mapping[str, Any]) -> tuple[bytes, str, int | None]:
        text = body.get("text")
        if text is not None:
            try:
                raw = text.encode("utf-8")
                stored, is_b64 = text, False
            except UnicodeEncodeError:
                # A lone surrogate (a leniently read line): the bytes it stands for are kept
                # as they are, as base64, since no UTF-8 text column can hold them.
                raw = text.encode("utf-8", "surrogatepass")
                stored, is_b64 = base64.b64encode(raw).decode("ascii"), True
        else:
            stored = body.get("b64") or ""
            raw = base64.b64decode(stored)
            is_b64 = True
        data_hash = _raw_hash(raw)
        self._store_payload(data_hash, stored, is_b64)
        return raw, data_hash, body.get("truncated_bytes")

    def _store_payload(self, data_hash: str, text: str, is_b64: bool) -> None:
        if data_hash not in self._seen_payloads:
            self._seen_payloads.add(data_hash)
            p = self._payload
            p[0](data_hash)
            p[1](text)
            p[2](is_b64)

    def _body_messages(
        self,
        flow: _Flow,
        raw: bytes,
        record: Mapping[str, Any],
        source: str,
        direction: str,
        *,
        request: bool,
    ) -> None:
        described = _describe_payload(raw)
        data_hash = described.data_hash
        if described.result_version is not None and flow.result_version is None:
            flow.result_version = described.result_version
        ts, seq = record["ts_ns"], record["seq"]
        for row in described.rows:
            self._message(flow.flow_id, ts, seq, source, None, None, direction, data_hash, row)
        self._tools(flow.flow_id, ts, seq, described.tools)
        if request:
            first = next((r for r in described.rows if r[3] is not None), None)
            first_request = next((r for r in described.rows if r[1] == "request"), None)
            init = next(
                (r for r in described.rows if r[1] == "request" and r[3] == "initialize"), None
            )
            meta_row = init or first_request
            flow.rpc = (
                described.top_kind,
                first_request[2] if first_request else None,
                first[3] if first else None,
                meta_row[13] if meta_row else None,
                meta_row[12] if meta_row else None,
            )
            flow.initialize = init is not None

    # -- SSE --------------------------------------------------------------------------------

    def _feed(self, flow: _Flow, raw: bytes, ts: int, seq: int, n: int) -> None:
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        for event in decoder.feed(raw):
            self._event(flow, event, ts, seq, n)

    def _close_decoder(self, flow: _Flow) -> None:
        decoder = flow.decoder
        if decoder is None:
            return
        decoder.flush()
        tail = decoder.tail
        flow.tail_bytes = len(tail) if tail else None
        flow.decoder = None

    def _event(self, flow: _Flow, event: SseEvent, ts: int, seq: int, n: int) -> None:
        ordinal = flow.events
        flow.events = ordinal + 1
        flow.last_cursor = event.last_event_id
        if event.id and flow.first_cursor is None:
            flow.first_cursor = event.id
        retry = event.retry
        warnings = event.warnings
        if retry is not None:
            if retry >= S.INT64_END:
                # Valid per WHATWG (ASCII digits) but past any Int64 column: no real delay.
                retry = None
                warnings = (*warnings, "retry-too-large")
            else:
                flow.last_retry = retry
        flow_id = flow.flow_id
        if event.id_only:
            data_hash = payload_hash = None
            data_bytes = 0
        else:
            flow.payload_events += 1
            data = event.data
            kind = event.event
            if kind == "message":
                described = self._memo.get(data)
                if described is None:
                    described = _describe_payload(data.encode("utf-8", "surrogatepass"), data)
                    if len(self._memo) >= _MEMO_MAX:
                        self._memo.clear()
                    self._memo[data] = described
                data_hash = described.data_hash
                data_bytes = described.data_bytes
                payload_hash = described.payload_hash
                msg = self._msg
                event_id = event.id
                if described.result_version is not None and flow.result_version is None:
                    flow.result_version = described.result_version
                for row in described.rows:
                    msg((flow_id, ts, seq, "sse", ordinal, row[0], event_id, "s2c", *row[1:6],
                         data_hash, *row[6:]))  # fmt: skip
                if described.tools:
                    self._tools(flow_id, ts, seq, described.tools)
            else:
                # Not a JSON-RPC carrier (the legacy `endpoint` event, custom types): the
                # payload is (type, data) compared as bytes.
                if kind == "endpoint" and flow.endpoint_url is None:
                    flow.endpoint_url = data
                raw = data.encode("utf-8", "surrogatepass")
                data_hash = payload_hash = _raw_hash(raw)
                data_bytes = len(raw)
            if data_hash not in self._seen_payloads:
                self._store_payload(data_hash, data, False)
        self._ev(
            (
                flow_id,
                ts,
                seq,
                ordinal,
                n,
                event.id,
                event.last_event_id,
                event.event,
                data_hash,
                data_bytes,
                payload_hash,
                retry,
                event.id_only,
                event.comments,
                _json_list(warnings) if warnings else None,
                flow.payload_events,
            )
        )

    # -- rows -------------------------------------------------------------------------------

    def _message(
        self,
        flow_id: str,
        ts: int,
        seq: int,
        source: str,
        ordinal: int | None,
        event_id: str | None,
        direction: str,
        data_hash: str,
        row: _MsgRow,
    ) -> None:
        self._msg((flow_id, ts, seq, source, ordinal, row[0], event_id, direction, *row[1:6],
                   data_hash, *row[6:]))  # fmt: skip

    def _tools(self, flow_id: str, ts: int, seq: int, tools: Iterable[_ToolRow]) -> None:
        t = self._tool
        for tool in tools:
            t[0](flow_id)
            t[1](ts)
            t[2](seq)
            for index, value in enumerate(tool):
                t[index + 3](value)

    def _flow_row(self, flow: _Flow) -> None:
        req = flow.req
        if flow.capped or flow.undecoded:
            # The proxy could not decode all of the response (an unknown or broken content
            # coding, or past its decoding bound): what it carried is not all in the capture.
            self.counts["undecoded_body"] += 1
            flow.body_missing = True
        values = (
            flow.flow_id,
            flow.run_id,
            req[0],
            req[1],
            req[2],
            req[3],
            req[4],
            flow.path,
            flow.query,
            flow.client_ip,
            req[5],
            req[6],
            req[7],
            req[8],
            req[9],
            flow.client_value,
            flow.mcp_headers,
            flow.request_body_hash,
            flow.request_truncated,
            *flow.rpc[:3],
            flow.initialize,
            flow.rpc[3],
            flow.rpc[4],
            flow.result_version,
            flow.resp_ts,
            flow.resp_seq,
            flow.status,
            flow.content_type,
            flow.response_session_id,
            flow.replica,
            flow.replica_source,
            flow.streamed,
            flow.response_body_hash,
            flow.response_truncated,
            flow.body_missing,
            flow.end_ts,
            flow.end_seq,
            flow.end_how,
            flow.end_error,
            flow.chunks,
            flow.events,
            flow.payload_events,
            flow.first_cursor,
            flow.last_cursor or None,
            flow.last_retry,
            flow.tail_bytes,
            flow.endpoint_url,
            flow.capped,
            flow.unreachable,
        )
        cols = self._flow_cols.cols
        for name, value in zip(S.RAW_FLOWS, values, strict=True):
            cols[name].append(value)


def normalize_records(
    records: Iterable[dict[str, Any]],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
) -> NormalizedFrames:
    """Normalize records in memory (tests, dumps, HAR): all tables, payloads deduplicated."""
    normalizer = Normalizer(replica_header=replica_header, client_header=client_header)
    normalizer.add_all(records)
    return NormalizedFrames.concat([normalizer.finish()])
