"""One small MCP conversation written three ways: capture records, a mitmproxy dump, a HAR file.

Used to check that every input kind gives the same timeline where the formats carry the same
facts (DESIGN.md §6). Exchange i starts at T0 + 10·i ms, its response comes 1 ms later and it
ends 5 ms after it started.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.records import T0_NS, Capture, event, req, res, sse


@dataclass
class Exchange:
    method: str
    headers: dict[str, str]
    body: Any
    status: int
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: Any = None
    stream: str | None = None  # event-stream text
    how: str = "complete"


S = {"mcp-session-id": "S1", "mcp-protocol-version": "2025-11-25"}

CONVERSATION = [
    Exchange(
        "POST",
        {"content-type": "application/json"},
        req(
            "initialize", 1, protocolVersion="2025-11-25", clientInfo={"name": "c", "version": "1"}
        ),
        200,
        {"content-type": "application/json", "mcp-session-id": "S1", "x-served-by": "r1"},
        res(1, protocolVersion="2025-11-25"),
    ),
    Exchange(
        "POST",
        {**S, "content-type": "application/json"},
        req("tools/call", 2, name="rm", arguments={"p": 1}),
        200,
        {"content-type": "text/event-stream", "x-served-by": "r1"},
        stream=sse(event(req("notifications/progress", progress=1), id="e1")),
        how="client_closed",
    ),
    Exchange(
        "GET",
        {**S, "last-event-id": "e1"},
        None,
        200,
        {"content-type": "text/event-stream", "x-served-by": "r2"},
        stream=sse(event(res(2, content=[]), id="e2")),
    ),
    Exchange("DELETE", S, None, 200, {"x-served-by": "r2"}),
]


def _ns(i: int, offset_ms: float) -> int:
    return T0_NS + int((10 * i + offset_ms) * 1_000_000)


def _bytes(body: Any) -> bytes | None:
    return None if body is None else json.dumps(body).encode()


def capture_records() -> list[dict[str, Any]]:
    c = Capture().open()
    for i, x in enumerate(CONVERSATION):
        c._ms = 10 * i - 1
        f = c.request(x.method, body=x.body, headers=x.headers, at=10 * i)
        c.response(
            f,
            x.status,
            x.response_body,
            headers=x.response_headers,
            sse=x.stream is not None,
            at=10 * i + 1,
        )
        if x.stream is not None:
            c.chunk(f, x.stream, n=0, at=10 * i + 2)
        c.end(f, x.how, at=10 * i + 5)
    c.close()
    return c.records


def write_mitm(path: Path) -> Path:
    from mitmproxy import http, io
    from mitmproxy.test import tflow

    with path.open("wb") as fh:
        writer = io.FlowWriter(fh)
        for i, x in enumerate(CONVERSATION):
            flow = tflow.tflow()
            flow.request = http.Request.make(
                x.method, "http://mcp.test:9000/mcp", _bytes(x.body) or b"", x.headers
            )
            flow.request.timestamp_start = _ns(i, 0) / 1e9
            flow.request.timestamp_end = _ns(i, 0) / 1e9
            content = x.stream.encode() if x.stream else (_bytes(x.response_body) or b"")
            flow.response = http.Response.make(x.status, content, x.response_headers)
            flow.response.timestamp_start = _ns(i, 1) / 1e9
            flow.response.timestamp_end = _ns(i, 2) / 1e9
            flow.client_conn.peername = ("10.0.0.1", 5000)
            flow.server_conn.peername = ("127.0.0.1", 9000)
            flow.error = None
            writer.add(flow)
    return path


def write_har(path: Path) -> Path:
    entries = []
    for i, x in enumerate(CONVERSATION):
        started = datetime.fromtimestamp(_ns(i, 0) / 1e9, UTC).isoformat().replace("+00:00", "Z")
        entry: dict[str, Any] = {
            "startedDateTime": started,
            "time": 5,
            "request": {
                "method": x.method,
                "url": "http://mcp.test:9000/mcp",
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in x.headers.items()],
            },
            "response": {
                "status": x.status,
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in x.response_headers.items()],
                "content": {"size": 0, "mimeType": x.response_headers.get("content-type", "")},
            },
            "timings": {"send": 0, "wait": 1, "receive": 4},
            "serverIPAddress": "127.0.0.1",
        }
        if x.body is not None:
            entry["request"]["postData"] = {
                "mimeType": "application/json",
                "text": json.dumps(x.body),
            }
        if x.response_body is not None:
            entry["response"]["content"]["text"] = json.dumps(x.response_body)
        if x.stream is not None:
            entry["response"]["content"]["text"] = x.stream
        entries.append(entry)
    path.write_text(
        json.dumps(
            {
                "log": {
                    "version": "1.2",
                    "creator": {"name": "t", "version": "1"},
                    "entries": entries,
                }
            }
        )
    )
    return path
