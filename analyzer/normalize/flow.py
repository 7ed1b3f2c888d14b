"""Per-flow state of the normalizer (`FlowState`), and what the bulk lane (`analyzer.ingest.bulk`)
hands it: `SseRun`, `BulkDescription` and the frames of described payloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import polars as pl

from analyzer import schema as S
from analyzer.normalize.columns import table_frame
from analyzer.normalize.describe import (
    PLAIN_COLUMNS,
    PLAIN_NULLS,
    Described,
    PlainRow,
)
from analyzer.sse import SseDecoder

MCP_HEADER_PREFIXES = ("mcp-method", "mcp-name", "mcp-param-")


def media_type(value: str | None) -> str | None:
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower()


def client_ip(address: str | None) -> str | None:
    if not address:
        return None
    if address.startswith("["):  # [v6]:port
        return address[1 : address.find("]")] if "]" in address else address
    host, sep, port = address.rpartition(":")
    if not sep or ":" in host or not port.isdigit():
        return address  # no port, or a bare IPv6 address
    return host


def decoder_idle(decoder: SseDecoder | None) -> bool:
    return decoder is None or decoder.idle


class FlowState:
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

    def row(self) -> tuple[Any, ...]:
        """The flow's row of `analyzer.schema.RAW_FLOWS`, values in column order."""
        return (
            self.flow_id,
            self.run_id,
            self.req[0],
            self.req[1],
            self.req[2],
            self.req[3],
            self.req[4],
            self.path,
            self.query,
            self.client_ip,
            self.req[5],
            self.req[6],
            self.req[7],
            self.req[8],
            self.req[9],
            self.client_value,
            self.mcp_headers,
            self.request_body_hash,
            self.request_truncated,
            *self.rpc[:3],
            self.initialize,
            self.rpc[3],
            self.rpc[4],
            self.result_version,
            self.resp_ts,
            self.resp_seq,
            self.status,
            self.content_type,
            self.response_session_id,
            self.replica,
            self.replica_source,
            self.streamed,
            self.response_body_hash,
            self.response_truncated,
            self.body_missing,
            self.end_ts,
            self.end_seq,
            self.end_how,
            self.end_error,
            self.chunks,
            self.events,
            self.payload_events,
            self.first_cursor,
            self.last_cursor or None,
            self.last_retry,
            self.tail_bytes,
            self.endpoint_url,
            self.capped,
            self.unreachable,
        )


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

    carried: pl.DataFrame  # `CARRIED`: one row a non-empty buffer
    messages: pl.DataFrame  # `event`, then RAW_MESSAGES from member on
    tools: pl.DataFrame  # `event`, then RAW_TOOLS from rpc_id on


_BULK_MESSAGE_COLUMNS = ("member", "kind", "rpc_id", "method", "reason", "payload_hash",
                         "data_hash", *list(S.RAW_MESSAGES)[14:])  # fmt: skip
_BULK_TOOL_COLUMNS = list(S.RAW_TOOLS)[3:]
_EVENT: Final = ("event", pl.Int64())
BULK_MESSAGE_SCHEMA: Final = pl.Schema(
    [_EVENT, *((name, S.RAW_MESSAGES[name]) for name in _BULK_MESSAGE_COLUMNS)]
)
_BULK_TOOL_SCHEMA: Final = pl.Schema(
    [_EVENT, *((name, S.RAW_TOOLS[name]) for name in _BULK_TOOL_COLUMNS)]
)
# What an event's data gives the event itself (`result_version`: of an initialize result).
CARRIED: Final = pl.Schema(
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
        (name, pl.Int64() if name == "data_bytes" else BULK_MESSAGE_SCHEMA[name])
        for name in PLAIN_COLUMNS
    ]
)


def plain_frame(at: list[int], rows: list[PlainRow]) -> pl.DataFrame:
    """The plain messages' columns: `CARRIED` and `BULK_MESSAGE_SCHEMA` both."""
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
        *(pl.lit(None, BULK_MESSAGE_SCHEMA[name]).alias(name) for name in PLAIN_NULLS),
    )


class _General(NamedTuple):
    carried: pl.DataFrame
    messages: pl.DataFrame
    tools: pl.DataFrame


def general_frames(at: list[int], described: list[Described]) -> _General:
    """The frames of `BulkDescription` for payloads described the general way."""
    carried = table_frame(
        CARRIED,
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
        carried, table_frame(BULK_MESSAGE_SCHEMA, messages), table_frame(_BULK_TOOL_SCHEMA, tools)
    )
