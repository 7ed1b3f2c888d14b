"""Hand-built capture records for tests: a tiny fluent builder of schema-1 record dicts.

Each method appends one record with the next `seq` and a `ts_ns` 1 ms after the previous one
(`at=` pins a time in ms since `T0`), so expected frames can be written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analyzer.records import body_from_bytes

T0_NS = 1_750_000_000_000_000_000
"""ts_ns of the first record (2025-06-15T15:06:40Z)."""

JSONRPC = "2.0"
UPSTREAM = "127.0.0.1:9000"
"""The origin every built record names (the default `replica` of a response)."""


def ms(at: float) -> int:
    """ts_ns of `at` ms after T0."""
    return T0_NS + int(at * 1_000_000)


def req(method: str, id: int | str | None = None, **params: Any) -> dict[str, Any]:
    """A JSON-RPC request (or a notification when id is None)."""
    msg: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if id is not None:
        msg["id"] = id
    if params:
        msg["params"] = params
    return msg


def res(id: int | str, **result: Any) -> dict[str, Any]:
    """A JSON-RPC result response."""
    return {"jsonrpc": JSONRPC, "id": id, "result": result}


def sse(*blocks: str) -> str:
    """Join event blocks ("id: 1\\ndata: x") into stream text, each ended by a blank line."""
    return "".join(block + "\n\n" for block in blocks)


def event(data: Any = None, id: str | None = None, event: str | None = None) -> str:
    """One SSE block; `data` dicts are JSON-encoded compactly."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        lines.extend(f"data: {line}" for line in text.split("\n"))
    return "\n".join(lines)


class Capture:
    """Builds the records of one capture run."""

    def __init__(self, run_id: str = "run-1", *, client: str = "10.0.0.1:5000") -> None:
        self.run_id = run_id
        self.client = client
        self.records: list[dict[str, Any]] = []
        self._seq = 0
        self._ms = 0.0
        self._flows = 0

    def _rec(self, kind: str, at: float | None, **fields: Any) -> dict[str, Any]:
        if at is not None:
            self._ms = at
        else:
            self._ms += 1
        record = {"kind": kind, "seq": self._seq, "ts_ns": ms(self._ms), "mono_ns": self._seq}
        record.update(fields)
        self._seq += 1
        self.records.append(record)
        return record

    def open(self, *, schema: str = "1.0", file_index: int = 0, **extra: Any) -> Capture:
        self._rec(
            "capture_open",
            None,
            schema=schema,
            run_id=self.run_id,
            file_index=file_index,
            tool_version="test",
            mitmproxy_version="12.3.1",
            redaction={"enabled": False},
            listen="127.0.0.1:8080",
            upstream=UPSTREAM,
            **extra,
        )
        return self

    def request(
        self,
        method: str = "POST",
        path: str = "/mcp",
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        flow: str | None = None,
        client: str | None = None,
        at: float | None = None,
    ) -> str:
        """Record a request; returns its flow id (f1, f2, ... unless given)."""
        if flow is None:
            self._flows += 1
            flow = f"f{self._flows}"
        raw = None
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if raw is not None:
            hdrs.setdefault("content-type", "application/json")
        self._rec(
            "request",
            at,
            flow=flow,
            method=method,
            scheme="http",
            authority="mcp.test:9000",
            path=path,
            http_version="HTTP/1.1",
            headers=[[k, v] for k, v in hdrs.items()],
            client=client or self.client,
            upstream=UPSTREAM,
            body=None if raw is None else body_from_bytes(raw),
        )
        return flow

    def response(
        self,
        flow: str,
        status: int = 200,
        body: Any = None,
        *,
        sse: bool = False,
        headers: dict[str, str] | None = None,
        replica: str | None = UPSTREAM,
        at: float | None = None,
    ) -> Capture:
        hdrs = dict(headers or {})
        if sse:
            hdrs.setdefault("content-type", "text/event-stream")
        elif body is not None:
            hdrs.setdefault("content-type", "application/json")
        raw = None
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self._rec(
            "response",
            at,
            flow=flow,
            status=status,
            http_version="HTTP/1.1",
            headers=[[k, v] for k, v in hdrs.items()],
            replica=replica,
            replica_source="upstream" if replica else None,
            streamed=sse,
            body=None if raw is None else body_from_bytes(raw),
        )
        return self

    def chunk(self, flow: str, text: str | bytes, *, n: int, at: float | None = None) -> Capture:
        raw = text.encode() if isinstance(text, str) else text
        self._rec("chunk", at, flow=flow, n=n, content_encoding=None, data=body_from_bytes(raw))
        return self

    def end(
        self, flow: str, how: str = "complete", error: str | None = None, at: float | None = None
    ) -> Capture:
        self._rec("stream_end", at, flow=flow, how=how, error=error)
        return self

    def close(self) -> Capture:
        self._rec("capture_close", None, seen=0, written=self._seq + 1, dropped=0)
        return self

    def lines(self) -> list[bytes]:
        return [json.dumps(r, separators=(",", ":")).encode() for r in self.records]

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(line + b"\n" for line in self.lines()))
        return path


def timeline_of(capture: Capture, **options: Any) -> Any:
    """The timeline of a built capture (normalized in memory)."""
    from analyzer.normalize import normalize_records
    from analyzer.timeline import RawTables, build_timeline

    frames = normalize_records(capture.records, **options)
    return build_timeline(RawTables.from_frames(frames))


def rows(frame: Any, *columns: str) -> list[tuple[Any, ...]]:
    """Selected columns of a (lazy) frame as tuples, in frame order."""
    if hasattr(frame, "collect"):
        frame = frame.collect()
    result: list[tuple[Any, ...]] = frame.select(columns).rows()
    return result
