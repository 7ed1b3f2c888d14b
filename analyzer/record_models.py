"""The pydantic models of capture schema 1 (`analyzer.records`): one per record kind.

The reference for the capture's readers and the tests: `RECORD_ADAPTER` validates one record,
whatever its kind. The capture writer checks its `capture_open` fields with it once; the hot
paths (the recorder, the readers) build and read plain dicts.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from analyzer.records import ReplicaSource, StreamEndHow


class Body(BaseModel):
    """Bytes on the wire: `text` when valid UTF-8, else `b64`; `truncated_bytes` past the cap;
    `decode_error` when the body could not be undone from its Content-Encoding (then the bytes
    are as they came, still encoded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = None
    b64: str | None = None
    truncated_bytes: int | None = None
    decode_error: str | None = None  # 1.2

    @model_validator(mode="after")
    def _exactly_one(self) -> Body:
        if (self.text is None) == (self.b64 is None):
            raise ValueError("a body holds exactly one of text or b64")
        return self

    def raw(self) -> bytes:
        """The recorded bytes (the head only, when truncated)."""
        if self.text is not None:
            return self.text.encode("utf-8")
        return base64.b64decode(self.b64 or "")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=0, description="assigned by the writer: a gap means loss on disk")
    ts_ns: int = Field(description="wall clock, ns since the epoch")
    mono_ns: int = Field(description="monotonic clock, ns; orders records within one run")


class RedactionPolicy(BaseModel):
    """What the capture redacted; `key_id` names the per-capture HMAC key without revealing it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool
    key_id: str | None = None
    headers: list[str] = []
    json_keys: list[str] = []
    query_keys: list[str] = []  # request-target query names redacted beside json_keys (1.1)


class RetentionDeleted(BaseModel):
    """A capture file that retention deleted before this file was opened (1.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    run_id: str | None
    file_index: int | None
    first_seq: int | None
    last_seq: int | None
    bytes: int
    reason: Literal["max_bytes", "max_age"]


class RetentionPolicy(BaseModel):
    """The capture folder's bounds, what was deleted since the writer's previous file, and per
    run the last `seq` deleted so far (every record of that run up to it is gone) (1.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_bytes: int | None
    max_age_s: float | None
    deleted: list[RetentionDeleted] = []
    cut: dict[str, int] = {}


class CaptureOpen(_Record):
    kind: Literal["capture_open"] = "capture_open"
    schema_: str = Field(alias="schema", description="major.minor")
    run_id: str
    file_index: int = Field(ge=0, description="rotation ordinal of this file within the run")
    tool_version: str
    mitmproxy_version: str
    redaction: RedactionPolicy
    listen: str | None
    upstream: str | None
    replica_header: str | None = None
    client_header: str | None = None
    mode: str | None = Field(default=None, description="mitmproxy's proxy mode (1.3)")
    retention: RetentionPolicy | None = None  # 1.3


class Request(_Record):
    kind: Literal["request"] = "request"
    flow: str
    method: str
    scheme: str
    authority: str
    path: str = Field(description="path and query as sent")
    http_version: str
    headers: list[tuple[str, str]]
    client: str = Field(description="client address host:port")
    upstream: str | None = Field(description="upstream address host:port, when known")
    body: Body | None


class Response(_Record):
    kind: Literal["response"] = "response"
    flow: str
    status: int
    http_version: str
    headers: list[tuple[str, str]]
    replica: str | None
    replica_source: ReplicaSource | None
    streamed: bool = Field(description="body arrives as chunk records")
    body: Body | None = Field(description="absent when streamed")


class Chunk(_Record):
    kind: Literal["chunk"] = "chunk"
    flow: str
    n: int = Field(ge=0, description="ordinal within the response")
    content_encoding: str | None
    data: Body
    decompress_capped: bool = False
    unterminated: bool = Field(False, description="the stream's tail, recorded at stream end")


class StreamEnd(_Record):
    kind: Literal["stream_end"] = "stream_end"
    flow: str
    how: StreamEndHow
    error: str | None = None


class ServerUnreachable(_Record):
    kind: Literal["server_unreachable"] = "server_unreachable"
    upstream: str
    error: str
    flow: str | None = None


class Counters(BaseModel):
    """Capture health counters; cumulative since capture_open of the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seen: int = 0
    written: int = 0
    dropped: int = 0
    redacted: int = 0
    addon_errors: int = 0


class CaptureStats(_Record, Counters):
    kind: Literal["capture_stats"] = "capture_stats"


class CaptureClose(_Record, Counters):
    kind: Literal["capture_close"] = "capture_close"


AnyRecord = Annotated[
    CaptureOpen
    | Request
    | Response
    | Chunk
    | StreamEnd
    | ServerUnreachable
    | CaptureStats
    | CaptureClose,
    Field(discriminator="kind"),
]

RECORD_ADAPTER: TypeAdapter[AnyRecord] = TypeAdapter(AnyRecord)
