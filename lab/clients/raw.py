"""Scripted raw-HTTP MCP clients (httpx, no SDK): exact control of cursors, drops and retries.

`SessionedClient` speaks the sessioned era (2025-11-25: `initialize`, `Mcp-Session-Id`, GET
streams, `Last-Event-ID`); `ModernClient` speaks 2026-07-28 (no session, the `_meta` envelope
and the `Mcp-Method` / `Mcp-Name` headers, as the official SDK sends them). Both read
responses through `SseStream`, which yields every SSE block, id-only priming events included,
so a scenario sees and keeps the cursors a real client would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from lab.framework import LabError

SESSIONED_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
ACCEPT_BOTH = "application/json, text/event-stream"


class ClientError(LabError):
    """The server answered something the scripted client did not expect."""


@dataclass(frozen=True)
class SseEvent:
    """One SSE block as a client sees it (WHATWG field rules, without the last-id carry-over)."""

    id: str | None
    event: str
    data: str
    retry: int | None

    @property
    def message(self) -> dict[str, Any] | None:
        """The JSON-RPC message in `data`; None for an id-only (priming) event."""
        if not self.data:
            return None
        value = json.loads(self.data)
        if not isinstance(value, dict):
            raise ClientError(f"SSE data is not a JSON object: {self.data[:80]!r}")
        return value


@dataclass
class SseLineParser:
    """Line-level SSE parser: `feed(line)` returns an event at each blank line."""

    id: str | None = None
    event: str = ""
    data: list[str] = field(default_factory=list)
    retry: int | None = None
    seen_field: bool = False

    def feed(self, line: str) -> SseEvent | None:
        if line == "":
            if not self.seen_field:
                return None
            block = SseEvent(self.id, self.event or "message", "\n".join(self.data), self.retry)
            self.id, self.event, self.data, self.retry, self.seen_field = None, "", [], None, False
            return block
        if line.startswith(":"):
            return None  # a comment (keepalive ping)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        self.seen_field = True
        if name == "id" and "\0" not in value:
            self.id = value
        elif name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "retry" and value.isdigit():
            self.retry = int(value)
        return None


class SseStream:
    """An HTTP response being read as an event stream (or holding one JSON body)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status = response.status_code
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        self.is_sse = content_type == "text/event-stream"
        self.events: list[SseEvent] = []
        self._lines = response.aiter_lines() if self.is_sse else None
        self._parser = SseLineParser()
        self.ended = False

    async def next_event(self) -> SseEvent | None:
        """The next SSE block, or None once the response has ended."""
        if self._lines is None:
            raise ClientError(f"not an event stream: {self.status} {self.response.headers}")
        async for line in self._lines:
            event = self._parser.feed(line)
            if event is not None:
                self.events.append(event)
                return event
        self.ended = True
        return None

    async def until(self, predicate: Any) -> SseEvent:
        """Read until an event satisfies `predicate`; ClientError if the stream ends first."""
        while (event := await self.next_event()) is not None:
            if predicate(event):
                return event
        raise ClientError("the stream ended before the awaited event")

    async def response_message(self, request_id: object) -> dict[str, Any]:
        """The JSON-RPC response to `request_id`, from the JSON body or the event stream."""
        if not self.is_sse:
            await self.response.aread()
            body = self.response.json()
            if not isinstance(body, dict) or body.get("id") != request_id:
                raise ClientError(f"unexpected JSON answer to {request_id!r}: {body!r}")
            return body
        event = await self.until(
            lambda e: (
                (m := e.message) is not None and "method" not in m and m.get("id") == request_id
            )
        )
        message = event.message
        assert message is not None
        return message

    @property
    def last_event_id(self) -> str | None:
        """The last SSE id this stream carried (what a client keeps as its cursor)."""
        ids = [event.id for event in self.events if event.id]
        return ids[-1] if ids else None


def _result(message: dict[str, Any]) -> dict[str, Any]:
    if "error" in message:
        raise ClientError(f"JSON-RPC error: {message['error']}")
    result = message.get("result")
    if not isinstance(result, dict):
        raise ClientError(f"response without a result object: {message!r}")
    return result


class SessionedClient:
    """A 2025-11-25 client over raw HTTP: one session at a time, cursors kept by hand."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        client_name: str = "seamwatch-lab-raw",
        version: str = SESSIONED_VERSION,
    ) -> None:
        self.http = http
        self.url = url
        self.client_name = client_name
        self.version = version  # 2025-03-26, 2025-06-18 or 2025-11-25
        self.session_id: str | None = None
        self._next_id = 0

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
            if self.version != "2025-03-26":  # the header came with 2025-06-18
                headers["mcp-protocol-version"] = self.version
        headers.update(extra or {})
        return headers

    @asynccontextmanager
    async def post(
        self, body: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> AsyncIterator[SseStream]:
        """POST one JSON-RPC message; the response is open (and closed on exit)."""
        request = self.http.build_request(
            "POST", self.url, headers=self.headers(headers), content=json.dumps(body)
        )
        response = await self.http.send(request, stream=True)
        try:
            yield SseStream(response)
        finally:
            await response.aclose()

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> tuple[dict[str, Any], SseStream]:
        """Send a request and read its stream to the response; returns (result, stream)."""
        request_id = self.next_id()
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        async with self.post(body, headers=headers) as stream:
            if stream.status != 200:
                raise ClientError(f"{method} answered {stream.status}")
            message = await stream.response_message(request_id)
            if method == "initialize":
                self.session_id = stream.response.headers.get("mcp-session-id")
        return _result(message), stream

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> int:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        async with self.post(body) as stream:
            await stream.response.aread()
            return stream.status

    async def initialize(self, *, headers: dict[str, str] | None = None) -> SseStream:
        """initialize + notifications/initialized; a fresh session, ids restart at 1."""
        self.session_id = None
        self._next_id = 0
        params = {
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": self.client_name, "version": "1"},
        }
        result, stream = await self.request("initialize", params, headers=headers)
        if result.get("protocolVersion") != self.version or self.session_id is None:
            raise ClientError(f"initialize did not open a {self.version} session: {result}")
        status = await self.notify("notifications/initialized")
        if status != 202:
            raise ClientError(f"notifications/initialized answered {status}")
        return stream

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[str, SseStream]:
        """tools/call; returns the first text content and the stream that carried it."""
        result, stream = await self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise ClientError(f"tool {name} failed: {result}")
        return str(result["content"][0]["text"]), stream

    @asynccontextmanager
    async def get_stream(self, last_event_id: str | None = None) -> AsyncIterator[SseStream]:
        """Open a GET stream (a resume when `last_event_id` is given); closed on exit."""
        extra = {"accept": "text/event-stream"}
        if last_event_id is not None:
            extra["last-event-id"] = last_event_id
        request = self.http.build_request("GET", self.url, headers=self.headers(extra))
        response = await self.http.send(request, stream=True)
        try:
            stream = SseStream(response)
            if stream.status != 200 or not stream.is_sse:
                raise ClientError(f"GET answered {stream.status}, not an event stream")
            yield stream
        finally:
            await response.aclose()

    async def delete(self) -> int:
        response = await self.http.delete(self.url, headers=self.headers())
        return response.status_code


class ModernClient:
    """A 2026-07-28 client over raw HTTP: every request self-contained, ids chosen by hand."""

    def __init__(
        self, http: httpx.AsyncClient, url: str, *, client_name: str = "seamwatch-lab-raw"
    ) -> None:
        self.http = http
        self.url = url
        self.client_info = {"name": client_name, "version": "1"}

    def body(
        self,
        request_id: int,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        progress_token: str | int | None = None,
    ) -> dict[str, Any]:
        """A request with the `_meta` envelope the SDK client sends."""
        meta: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientInfo": self.client_info,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        if progress_token is not None:
            meta["progressToken"] = progress_token
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**(params or {}), "_meta": meta},
        }

    @asynccontextmanager
    async def post(self, body: dict[str, Any]) -> AsyncIterator[SseStream]:
        """POST one request with the mirrored routing headers; closed on exit (a cancel)."""
        headers = {
            "accept": ACCEPT_BOTH,
            "content-type": "application/json",
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": body["method"],
        }
        name = body.get("params", {}).get("name")
        if body["method"] == "tools/call" and isinstance(name, str):
            headers["mcp-name"] = name
        request = self.http.build_request(
            "POST", self.url, headers=headers, content=json.dumps(body)
        )
        response = await self.http.send(request, stream=True)
        try:
            yield SseStream(response)
        finally:
            await response.aclose()

    async def request(
        self, request_id: int, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send a request and wait for its result."""
        async with self.post(self.body(request_id, method, params)) as stream:
            if stream.status != 200:
                raise ClientError(f"{method} answered {stream.status}")
            return _result(await stream.response_message(request_id))


async def wait_until(predicate: Any, *, timeout: float, interval: float = 0.02) -> None:
    """Poll an async predicate (lab state, never the wire) until true; TimeoutError otherwise."""
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(interval)
