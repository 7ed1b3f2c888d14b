"""Hand-built capture records for tests: a tiny fluent builder of schema-1 record dicts.

Each method appends one record with the next `seq` and a `ts_ns` 1 ms after the previous one
(`at=` pins a time in ms since `T0`), so expected frames can be written by hand.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
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
        origin: str | None = None,
    ) -> str:
        """Record a request; returns its flow id (f1, f2, ... unless given). `origin`
        (`scheme://host:port`): recorded as the proxy records one, the host alone as authority
        and the port in the upstream address; else `http://mcp.test:9000`."""
        if flow is None:
            self._flows += 1
            flow = f"f{self._flows}"
        raw = None
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if raw is not None:
            hdrs.setdefault("content-type", "application/json")
        scheme, authority, upstream = "http", "mcp.test:9000", UPSTREAM
        if origin is not None:
            scheme, _, upstream = origin.partition("://")
            authority = upstream.rpartition(":")[0]
        self._rec(
            "request",
            at,
            flow=flow,
            method=method,
            scheme=scheme,
            authority=authority,
            path=path,
            http_version="HTTP/1.1",
            headers=[[k, v] for k, v in hdrs.items()],
            client=client or self.client,
            upstream=upstream,
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

    def chunk(
        self,
        flow: str,
        text: str | bytes,
        *,
        n: int,
        at: float | None = None,
        encoding: str | None = None,
    ) -> Capture:
        """A chunk of `text` (as recorded: after undoing the response's `encoding`, if any)."""
        raw = text.encode() if isinstance(text, str) else text
        self._rec("chunk", at, flow=flow, n=n, content_encoding=encoding, data=body_from_bytes(raw))
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


# --- a cut and a resume, along the axes real servers vary on ----------------------------------

ID_SCHEMES: dict[str, Callable[[str, int], str]] = {
    "integer": lambda stream, n: str(n),
    "padded": lambda stream, n: f"evt-{n:06d}",
    "stream_n": lambda stream, n: f"{stream}_{n}",
    "uuid": lambda stream, n: str(uuid.uuid5(uuid.NAMESPACE_URL, f"{stream}/{n}")),
    "epoch_rand": lambda stream, n: f"{1_750_000_000_000 + 37 * n}-{(n * 7919) % 9973:04x}",
    "constant": lambda stream, n: "0",
}
"""Event-id schemes servers use: `(stream, n) -> id` for the n-th id a stream issues."""
PER_STREAM_COUNTERS = frozenset({"integer", "padded", "stream_n"})
"""The schemes of `ID_SCHEMES` that are a per-stream counter."""
PRIMING_ERAS = frozenset({"2025-11-25"})
"""Eras whose servers open a stream with a priming event (2026-07-28 has no resume at all)."""


@dataclass(frozen=True)
class Cut:
    """A tools/call stream (or, with `owed=False`, the standalone GET stream) cut after the
    client saw `seen` of its `messages` (0: only the priming event), `lost` more having passed
    the proxy, then resumed with the client's cursor and answered as `answer` says:

    `replay` (everything after the cursor, then a new priming event), `tail` (the replay skips
    two messages: an evicting buffer), `fresh` (replica b's own stream under fresh ids and other
    payloads), `other_payloads` (the due ids carrying other payloads), `empty` (200, no event),
    `404` / `409`, `control` (an honest "new stream" event, then fresh messages),
    `control_data` (the same said only by `"resumed": false` in the data).
    `progress`: `total` / `bare` (progress notifications with or without a total) or `none`
    (`notifications/message` instead). `replica`: an `X-Served-By` replica (a, and b for a
    fresh answer) or none. `chunking`: `one` event a chunk, `several` in one chunk, `midline`
    (chunks cut inside lines), `gzip` (one event a chunk of a gzip-coded response, recorded
    decoded as the proxy does).
    """

    ids: str = "padded"
    seen: int = 2
    lost: int = 0
    messages: int = 6
    progress: str = "total"
    answer: str = "replay"
    owed: bool = True
    replica: bool = True
    era: str = "2025-11-25"
    chunking: str = "one"

    def build(self, c: Capture) -> None:
        """Write the session, the cut stream and the resume into `c`."""
        sid = "3c1e9f7a0b2d4e6f"
        headers = {"MCP-Protocol-Version": self.era}
        if self.era != "2026-07-28":
            headers["Mcp-Session-Id"] = sid
        f = c.request(body=req("initialize", 0, protocolVersion=self.era, capabilities={}))
        c.response(f, body=res(0, protocolVersion=self.era), headers={"Mcp-Session-Id": sid})
        idof = functools.partial(ID_SCHEMES[self.ids], "s7f3")
        primed = self.era in PRIMING_ERAS
        blocks = [event(id=idof(1), data="")] if primed else []
        base = 2 if primed else 1  # the counter of message 1
        blocks += [self._message(idof(base + k - 1), k) for k in range(1, self.messages + 1)]
        rid = 5
        result = event(
            res(rid, content=[{"type": "text", "text": "done"}]), id=idof(base + self.messages)
        )
        if self.owed:
            body = req(
                "tools/call", rid, name="export", arguments={}, _meta={"progressToken": "tok"}
            )
            f = c.request(body=body, headers=headers)
        else:
            f = c.request("GET", headers=headers)
        c.response(f, sse=True, **self._replica("a"))
        shown = (1 if primed else 0) + self.seen
        self._chunks(c, f, blocks[: shown + self.lost])
        c.end(f, "error", error="connection reset")
        cursor = idof(base + self.seen - 1) if self.seen else idof(1)
        g = c.request("GET", headers={**headers, "Last-Event-ID": cursor})
        if self.era == "2026-07-28":  # no resumable streams: GET is refused
            c.response(g, 405)
            c.end(g)
            return
        if self.answer in ("404", "409"):
            c.response(g, int(self.answer), **self._replica("a"))
            c.end(g)
            return
        c.response(g, sse=True, **self._replica("b" if self.answer == "fresh" else "a"))
        self._chunks(c, g, self._answer(blocks, shown, result, idof))
        c.end(g)

    def _message(self, i: str, k: int, text: str = "step") -> str:
        if self.progress == "none":
            return event(req("notifications/message", level="info", data=f"{text} {k}"), id=i)
        total = {"total": self.messages} if self.progress == "total" else {}
        return event(req("notifications/progress", progressToken="tok", progress=k, **total), id=i)

    def _answer(self, blocks: list[str], shown: int, result: str, idof: Any) -> list[str]:
        after = blocks[shown:] + ([result] if self.owed else [])
        # A new priming event after the replay, under the stream's next id (as the Python SDK).
        following = idof(len(blocks) + 1 + (1 if self.owed else 0))  # blocks hold the priming
        closing = [event(id=following, data="")] if self.era in PRIMING_ERAS else []
        fresh = [event(req("notifications/message", level="info", data=f"hello {k}"), id=f"b-{k}")
                 for k in (1, 2)]  # fmt: skip
        if self.answer == "replay":
            return after + closing
        if self.answer == "tail":
            return after[2:] + closing
        if self.answer == "fresh":
            return fresh
        if self.answer == "other_payloads":
            due = blocks[shown:] or [result]
            ids = [line[4:] for b in due for line in b.split("\n") if line.startswith("id: ")]
            return [event(req("notifications/message", level="info", data="other"), id=i)
                    for i in ids]  # fmt: skip
        if self.answer == "control":
            return [event({"resumed": False}, id=idof(901), event="stream-reset"), *fresh]
        if self.answer == "control_data":
            return [event({"resumed": False, "reason": "unknown cursor"}, id=idof(901)), *fresh]
        return []  # empty

    def _replica(self, name: str) -> dict[str, Any]:
        if not self.replica:
            return {"replica": UPSTREAM}
        return {"replica": name, "headers": {"X-Served-By": name}}

    def _chunks(self, c: Capture, flow: str, blocks: list[str]) -> None:
        text = sse(*blocks)
        if self.chunking in ("one", "gzip"):
            parts = [sse(b) for b in blocks]
        elif self.chunking == "several":
            parts = [text] if text else []
        else:  # midline: cut every 11 bytes, inside lines and fields
            parts = [text[i : i + 11] for i in range(0, len(text), 11)]
        encoding = "gzip" if self.chunking == "gzip" else None
        for n, part in enumerate(parts):
            c.chunk(flow, part, n=n, encoding=encoding)
