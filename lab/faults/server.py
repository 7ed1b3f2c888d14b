"""A purpose-built Streamable HTTP server (2025-11-25, sessioned) whose faults are switches.

One module, one process per replica. What it does right, as the spec asks: `initialize` assigns
`Mcp-Session-Id` (kept in a SQLite file, so replicas share sessions), every later request must
carry it (400 without, 404 when unknown), DELETE ends the session, a `tools/call` that asks for
progress (`_meta.progressToken`) answers `text/event-stream` with a priming event (an `id` and
empty `data`), `notifications/progress` and the result; everything else answers JSON.

What it does wrong, on purpose (DESIGN.md §7):

- Event ids `e1`, `e2`, ... come from a counter in a buffer that lives in this process only, one
  buffer per session: a second replica issues the same ids again.
- `--buffer-size N` bounds the buffer (a ring: the oldest events are evicted first).
- `--buffer-ttl S` collects a buffer S seconds after its last event once no stream of it is
  live; the next event of the session starts a new buffer, and the counter starts again at 1.
- A resume (`GET` with `Last-Event-ID: e<n>`) replays whatever this process still buffers with
  a counter above n, from the first surviving event on (no check that the cursor itself is
  there). With nothing to replay it opens a fresh standalone stream under the old cursor:
  a priming event and a `notifications/message`, under whatever ids the counter gives.
- `--pause-after K`: the first streamed tool call of this process stops after K progress
  notifications until the client's connection for it is gone, then runs to the end into the
  buffer (the tool keeps running while the client is away, as disconnection is not
  cancellation).
- `--retry-ms MS`: every priming event carries `retry: MS` (how long a client must wait before it
  resumes a stream the server closed).
- `--close-after K`: the first streamed tool call's connection is ended by the server (a clean
  end of the response) right after K progress notifications; the tool runs on to the end into
  the buffer, to be fetched by a resume.
- `--ignore-delete`: DELETE answers 200 but the session lives on (it stays in the store, its
  streams stay open): later requests and resumes carrying it are still served.
- `--response-on-get`: a request answered with JSON (no progress token) is answered with 202
  instead while its session has a standalone GET stream attached; its JSON-RPC response goes
  out on that GET stream, which resumes no request's stream.
- `--stall-resumes`: a resume whose cursor names an event of a stream still in the buffer answers
  200 with only a new priming event (issued on that stream) and ends the response: nothing is
  replayed, the pending result never comes.
- `--answer-twice`: the first streamed tool call runs its tool a second time after the first
  result and sends that second, different result on the same stream under the same request id.
- `--drop-response`: the first streamed tool call finishes without its result: the stream counts
  as finished (a resume's replay ends), but no response is ever issued.
- `--fresh-resumes`: every resume is answered 200 with a fresh standalone stream (a priming event
  and a `notifications/message`), whatever the buffer holds: nothing is ever replayed.
- `--no-event-ids`: events go out without an `id:` and streams without a priming event, as from
  a server with no event store: a stream ended early (`--close-after`) cannot be resumed.

Every response carries `X-Served-By: <replica>`. Control endpoints for the scenarios, called
directly (never through the proxy, so they are not captured): `GET /lab/state`,
`POST /lab/settle` (waits until no tool runs; `?collected=1` also until the TTL collected every
buffer), `POST /lab/notify?session=S&text=T` (a `notifications/message` on the session's latest
standalone GET stream).

    python -m lab.faults.server --port 8001 --replica replica-a --store sessions.sqlite3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import re
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from lab.serving import serve

PROTOCOL_VERSION = "2025-11-25"
MCP_PATH = "/mcp"
SETTLE_TIMEOUT_S = 5.0
CURSOR = re.compile(r"e(\d+)")

log = logging.getLogger("lab.faults")

Json = dict[str, Any]

TOOLS: list[Json] = [
    {
        "name": "create_ticket",
        "description": "File a support ticket. Every call files a new one.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "steps": {"type": "integer", "minimum": 0, "default": 0},
            },
            "required": ["title"],
        },
        # No annotations: a side-effecting tool (readOnlyHint and destructiveHint default).
    },
    {
        "name": "lookup",
        "description": "Read one value of the lab's directory.",
        "inputSchema": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "slow_report",
        "description": "Build a report step by step, sending notifications/progress.",
        "inputSchema": {
            "type": "object",
            "properties": {"steps": {"type": "integer", "minimum": 0, "default": 3}},
        },
        "annotations": {"readOnlyHint": True},
    },
]


def dumps(message: Json) -> str:
    return json.dumps(message, separators=(",", ":"))


@dataclass(frozen=True)
class Event:
    """One SSE event as issued: counter `n` (id `e<n>`), its stream, JSON text or "" (priming)."""

    n: int
    stream: str
    data: str
    retry: int | None = None  # a `retry:` field (ms), sent on priming events when asked

    @property
    def id(self) -> str:
        return f"e{self.n}"

    def frame(self, with_id: bool = True) -> bytes:
        if not with_id:
            return f"event: message\ndata: {self.data}\n\n".encode()
        if not self.data:
            # 2025-11-25 priming event: an id and empty data, so the client holds a cursor.
            retry = "" if self.retry is None else f"retry: {self.retry}\n"
            return f"id: {self.id}\n{retry}data: \n\n".encode()
        return f"event: message\nid: {self.id}\ndata: {self.data}\n\n".encode()


class EventBuffer:
    """A session's events in this process: the id counter and a deque, bounded when asked."""

    def __init__(self, size: int | None) -> None:
        self.counter = 0
        self.events: deque[Event] = deque(maxlen=size)
        self.touched = time.monotonic()

    def issue(self, stream: str, data: str, retry: int | None = None) -> Event:
        self.counter += 1
        event = Event(self.counter, stream, data, retry)
        self.events.append(event)
        self.touched = time.monotonic()
        return event


@dataclass(eq=False)
class Stream:
    """A logical stream in this process: what a tool call's POST or a fresh GET opened."""

    id: str
    session: str
    outbox: asyncio.Queue[Event | None] | None = None  # the connection carrying it, if any
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # its last connection closed
    running: bool = False  # a tool still writes to it
    finished: bool = False  # its response was issued

    def attach(self) -> asyncio.Queue[Event | None]:
        self.outbox = asyncio.Queue()
        self.gone.clear()
        return self.outbox


class SessionStore:
    """Sessions and filed tickets in one SQLite file, shared by every replica."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS sessions (n INTEGER PRIMARY KEY, id TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS tickets (n INTEGER PRIMARY KEY, session TEXT)")

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # One short connection per call: replicas are separate processes. Each call takes
        # well under a millisecond on a local file, so it runs on the event loop.
        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def create(self) -> str:
        """A new session; ids are `<prefix>-<n>` so a re-run names the same sessions."""
        with self._db() as db:
            n = db.execute("INSERT INTO sessions (id) VALUES (NULL)").lastrowid
            session = f"{self.prefix}-{n}"
            db.execute("UPDATE sessions SET id = ? WHERE n = ?", (session, n))
        return session

    def exists(self, session: str) -> bool:
        with self._db() as db:
            row = db.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone()
        return row is not None

    def delete(self, session: str) -> bool:
        with self._db() as db:
            return db.execute("DELETE FROM sessions WHERE id = ?", (session,)).rowcount > 0

    def file_ticket(self, session: str) -> int:
        with self._db() as db:
            n = db.execute("INSERT INTO tickets (session) VALUES (?)", (session,)).lastrowid
        assert n is not None
        return n

    def tickets(self) -> int:
        with self._db() as db:
            return int(db.execute("SELECT count(*) FROM tickets").fetchone()[0])


def _switch(kind: type, text: str) -> Any:
    """A fault switch, off unless set: `kind` and `text` make its command-line option."""
    return field(default=False if kind is bool else None, metadata={"kind": kind, "help": text})


@dataclass(frozen=True)
class Faults:
    """The switches of one replica: the one place a fault is declared (its option follows)."""

    replica: str
    buffer_size: int | None = _switch(int, "ring buffer: keep the last N events")
    buffer_ttl: float | None = _switch(float, "collect idle buffers after S seconds")
    pause_after: int | None = _switch(int, "first streamed call waits after K steps")
    retry_ms: int | None = _switch(int, "priming events carry `retry: MS`")
    close_after: int | None = _switch(int, "the server ends the first streamed call after K steps")
    ignore_delete: bool = _switch(bool, "DELETE answers 200, the session lives on")
    response_on_get: bool = _switch(
        bool, "answer JSON requests with 202 and their response on the standalone GET stream"
    )
    stall_resumes: bool = _switch(
        bool, "a resume of a buffered stream gets only a new priming event, then the end"
    )
    answer_twice: bool = _switch(
        bool, "the first streamed call sends a second, different result under the same id"
    )
    drop_response: bool = _switch(
        bool, "the first streamed call finishes its stream without ever sending the result"
    )
    fresh_resumes: bool = _switch(
        bool, "every resume is answered with a fresh standalone stream, nothing replayed"
    )
    no_event_ids: bool = _switch(
        bool, "events carry no id and streams no priming event: nothing can be resumed"
    )

    @staticmethod
    def switches() -> list[Field[Any]]:
        """Every switch (every field but `replica`)."""
        return [f for f in fields(Faults) if "kind" in f.metadata]

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        """One option a switch: `--buffer-size N`, `--ignore-delete`, ..."""
        for switch in Faults.switches():
            option, kind = "--" + switch.name.replace("_", "-"), switch.metadata["kind"]
            if kind is bool:
                parser.add_argument(option, action="store_true", help=switch.metadata["help"])
            else:
                parser.add_argument(option, type=kind, help=switch.metadata["help"])

    @staticmethod
    def from_options(args: argparse.Namespace) -> Faults:
        """The faults `add_options`' options asked for."""
        return Faults(args.replica, **{s.name: getattr(args, s.name) for s in Faults.switches()})

    def options(self) -> list[str]:
        """The command-line options that give a server these switches (`--replica` aside)."""
        argv: list[str] = []
        for switch in Faults.switches():
            value, option = getattr(self, switch.name), "--" + switch.name.replace("_", "-")
            if value is True:
                argv.append(option)
            elif value is not None and value is not False:
                argv += [option, str(value)]
        return argv


class SseResponse:
    """Writes a stream's outbox as SSE until the server ends it (None) or the client leaves."""

    def __init__(self, server: FaultServer, stream: Stream, outbox: asyncio.Queue[Event | None]):
        self.server = server
        self.stream = stream
        self.outbox = outbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"mcp-session-id", self.stream.session.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        left = asyncio.ensure_future(_disconnected(receive))
        client_left = False
        try:
            while True:
                next_event = asyncio.ensure_future(self.outbox.get())
                await asyncio.wait({next_event, left}, return_when=asyncio.FIRST_COMPLETED)
                if not next_event.done():
                    next_event.cancel()
                    client_left = True
                    break
                event = next_event.result()
                if event is None:
                    break
                body = event.frame(with_id=not self.server.faults.no_event_ids)
                try:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                except OSError:
                    client_left = True
                    break
            if not client_left:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            left.cancel()
            self.server.detach(self.stream, self.outbox, client_left=client_left)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class FaultServer:
    """The replica's state: sessions (shared), buffers and streams (this process only)."""

    def __init__(self, faults: Faults, store: SessionStore) -> None:
        self.faults = faults
        self.store = store
        self.buffers: dict[str, EventBuffer] = {}
        self.streams: dict[str, Stream] = {}
        self.standalone: dict[str, Stream] = {}  # session -> its latest fresh GET stream
        self.stream_ids = itertools.count(1)
        self.streamed_calls = 0
        self.collected: list[str] = []
        self.tasks: set[asyncio.Task[None]] = set()

    # --- events and streams -------------------------------------------------------------

    def buffer(self, session: str) -> EventBuffer:
        if session not in self.buffers:
            self.buffers[session] = EventBuffer(self.faults.buffer_size)
        return self.buffers[session]

    def open_stream(self, session: str) -> tuple[Stream, asyncio.Queue[Event | None]]:
        stream = Stream(f"{self.faults.replica}/s{next(self.stream_ids)}", session)
        self.streams[stream.id] = stream
        outbox = stream.attach()
        if not self.faults.no_event_ids:
            priming = self.buffer(session).issue(stream.id, "", self.faults.retry_ms)
            outbox.put_nowait(priming)
        return stream, outbox

    def publish(self, stream: Stream, message: Json, *, final: bool = False) -> Event:
        """Issue `message` on `stream`: buffered always, written when a connection is attached."""
        event = self.buffer(stream.session).issue(stream.id, dumps(message))
        if final:
            stream.finished = True
        if stream.outbox is not None:
            stream.outbox.put_nowait(event)
            if final:
                stream.outbox.put_nowait(None)
        return event

    def finish(self, stream: Stream) -> None:
        """Mark `stream` finished and end its connection, if any, without issuing anything."""
        stream.finished = True
        if stream.outbox is not None:
            stream.outbox.put_nowait(None)

    def detach(
        self, stream: Stream, outbox: asyncio.Queue[Event | None], *, client_left: bool
    ) -> None:
        if stream.outbox is outbox:
            stream.outbox = None
            stream.gone.set()
        if client_left:
            log.info("%s: client left stream %s", self.faults.replica, stream.id)

    def live(self, session: str) -> bool:
        return any(
            s.session == session and (s.running or s.outbox is not None)
            for s in self.streams.values()
        )

    async def sweep(self, ttl: float) -> None:
        """Collect idle buffers (the TTL fault): their counters start again at 1."""
        while True:
            await asyncio.sleep(ttl / 4)
            now = time.monotonic()
            for session, buffer in list(self.buffers.items()):
                if now - buffer.touched > ttl and not self.live(session):
                    del self.buffers[session]
                    self.collected.append(session)
                    log.info("%s: collected the buffer of %s", self.faults.replica, session)

    # --- tools ----------------------------------------------------------------------------

    def run_tool(self, session: str, name: str, arguments: Json) -> tuple[Json, int]:
        """The tool's effect and result; returns (result, number of progress steps)."""
        if name == "create_ticket":
            ticket = self.store.file_ticket(session)
            text = f"filed ticket T-{ticket}: {arguments.get('title', '')}"
            steps = int(arguments.get("steps", 0))
            return {"content": [{"type": "text", "text": text}], "isError": False}, steps
        if name == "lookup":
            key = str(arguments.get("key", ""))
            text = f"{key} = value-of-{key}"
            return {"content": [{"type": "text", "text": text}], "isError": False}, 0
        if name == "slow_report":
            steps = int(arguments.get("steps", 3))
            text = f"report ready after {steps} steps"
            return {"content": [{"type": "text", "text": text}], "isError": False}, steps
        raise KeyError(name)

    async def stream_call(
        self,
        stream: Stream,
        request_id: object,
        token: object,
        result: Json,
        steps: int,
        again: Callable[[], Json],
    ) -> None:
        """Send progress and the result on `stream`; pause for the client to go if asked.

        `again` runs the tool once more, for `--answer-twice`.
        """
        self.streamed_calls += 1
        first = self.streamed_calls == 1
        pause = self.faults.pause_after if first else None
        close = self.faults.close_after if first else None
        try:
            for step in range(1, steps + 1):
                progress = {"progressToken": token, "progress": step, "total": steps}
                self.publish(stream, notification("notifications/progress", progress))
                if step == close and stream.outbox is not None:
                    log.info(
                        "%s: %s closed by the server after step %d",
                        self.faults.replica,
                        stream.id,
                        step,
                    )
                    # End the response now; what follows only goes into the buffer.
                    stream.outbox.put_nowait(None)
                    stream.outbox = None
                    stream.gone.set()
                if step == pause:
                    log.info("%s: %s paused after step %d", self.faults.replica, stream.id, step)
                    await stream.gone.wait()
            if first and self.faults.drop_response:
                # The fault: the stream ends as if answered; no response is ever issued.
                log.info("%s: %s finished without its result", self.faults.replica, stream.id)
                self.finish(stream)
                return
            response = {"jsonrpc": "2.0", "id": request_id, "result": result}
            if first and self.faults.answer_twice:
                # The fault: a second run of the tool, answered on the same stream, same id.
                self.publish(stream, response)
                response = {**response, "result": again()}
                log.info("%s: id=%s answered twice", self.faults.replica, request_id)
            self.publish(stream, response, final=True)
        finally:
            stream.running = False

    # --- HTTP -----------------------------------------------------------------------------

    async def post(self, request: Request) -> Response | SseResponse:
        try:
            message = json.loads(await request.body())
        except ValueError:
            return rpc_error(None, -32700, "Parse error", status=400)
        if not isinstance(message, dict):
            return rpc_error(None, -32600, "batches are not part of 2025-11-25", status=400)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            session = self.store.create()
            log.info("%s: initialize -> session %s", self.faults.replica, session)
            result = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "seamwatch-lab-faults", "version": "1"},
            }
            return rpc_result(request_id, result, session)
        session, refusal = self.session_of(request)
        if refusal is not None:
            return refusal
        if method is None or "id" not in message:
            return Response(status_code=202)  # a notification or a response
        params = message.get("params") or {}
        if method == "ping":
            return rpc_result(request_id, {}, session)
        if method == "tools/list":
            return rpc_result(request_id, {"tools": TOOLS}, session)
        if method != "tools/call":
            return rpc_error(request_id, -32601, f"method not found: {method}")
        name = str(params.get("name"))
        try:
            result, steps = self.run_tool(session, name, params.get("arguments") or {})
        except KeyError:
            return rpc_error(request_id, -32602, f"unknown tool: {name}")
        token = (params.get("_meta") or {}).get("progressToken")
        standalone = self.standalone.get(session) if self.faults.response_on_get else None
        if token is None and standalone is not None and standalone.outbox is not None:
            # The fault: the response goes on the standalone GET stream, the POST gets 202.
            log.info("%s: response to id=%s on %s", self.faults.replica, request_id, standalone.id)
            self.publish(standalone, {"jsonrpc": "2.0", "id": request_id, "result": result})
            return Response(status_code=202, headers={"mcp-session-id": session})
        if token is None:
            return rpc_result(request_id, result, session)
        stream, outbox = self.open_stream(session)
        stream.running = True
        log.info("%s: tools/call %s id=%s on %s", self.faults.replica, name, request_id, stream.id)
        arguments = params.get("arguments") or {}
        task = asyncio.get_running_loop().create_task(
            self.stream_call(
                stream,
                request_id,
                token,
                result,
                steps,
                lambda: self.run_tool(session, name, arguments)[0],
            )
        )
        self.tasks.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self.tasks.discard)
        return SseResponse(self, stream, outbox)

    async def get(self, request: Request) -> Response | SseResponse:
        session, refusal = self.session_of(request)
        if refusal is not None:
            return refusal
        cursor = request.headers.get("last-event-id")
        if cursor is not None and self.faults.fresh_resumes:
            # The fault: the cursor is ignored; the answer is a fresh standalone stream.
            log.info("%s: resume from %s answered afresh", self.faults.replica, cursor)
        elif cursor is not None:
            matched = CURSOR.fullmatch(cursor)
            after = int(matched.group(1)) if matched else None
            # The fault: whatever survives above the cursor's counter, cursor found or not.
            tail = [
                e
                for e in self.buffer(session).events
                if after is not None and e.n > after and e.data
            ]
            replayed = [e.id for e in tail]
            if self.faults.stall_resumes:
                resumed = next(
                    (e.stream for e in self.buffer(session).events if e.n == after), None
                )
                if resumed is not None:
                    log.info("%s: resume from %s stalled", self.faults.replica, cursor)
                    return self.stall(self.streams[resumed])
            log.info("%s: resume from %s replays %s", self.faults.replica, cursor, replayed)
            if tail:
                return self.replay(self.streams[tail[0].stream], tail)
        stream, outbox = self.open_stream(session)
        self.standalone[session] = stream
        opened = {"replica": self.faults.replica, "stream": "standalone"}
        params = {"level": "info", "logger": "seamwatch-lab", "data": opened}
        self.publish(stream, notification("notifications/message", params))
        return SseResponse(self, stream, outbox)

    def stall(self, stream: Stream) -> SseResponse:
        """The `--stall-resumes` fault: a new priming event on `stream`, then the end."""
        if stream.outbox is not None:
            stream.outbox.put_nowait(None)  # one connection per stream: end the old one
        outbox = stream.attach()
        outbox.put_nowait(self.buffer(stream.session).issue(stream.id, "", self.faults.retry_ms))
        outbox.put_nowait(None)
        return SseResponse(self, stream, outbox)

    def replay(self, stream: Stream, tail: list[Event]) -> SseResponse:
        if stream.outbox is not None:
            stream.outbox.put_nowait(None)  # one connection per stream: end the old one
        outbox = stream.attach()
        for event in tail:
            outbox.put_nowait(event)
        if stream.finished:
            outbox.put_nowait(None)
        return SseResponse(self, stream, outbox)

    async def delete(self, request: Request) -> Response:
        session, refusal = self.session_of(request)
        if refusal is not None:
            return refusal
        if self.faults.ignore_delete:
            log.info("%s: DELETE of %s ignored (answered 200)", self.faults.replica, session)
            return Response(status_code=200)
        self.store.delete(session)
        for stream in self.streams.values():
            if stream.session == session and stream.outbox is not None:
                stream.outbox.put_nowait(None)
        log.info("%s: session %s deleted", self.faults.replica, session)
        return Response(status_code=200)

    def session_of(self, request: Request) -> tuple[str, Response | None]:
        session = request.headers.get("mcp-session-id")
        if session is None:
            return "", rpc_error(None, -32000, "Mcp-Session-Id header is required", status=400)
        if not self.store.exists(session):
            return session, rpc_error(None, -32001, "Session not found", status=404)
        return session, None

    # --- control plane --------------------------------------------------------------------

    def state(self) -> Json:
        return {
            "replica": self.faults.replica,
            "buffers": {s: [e.id for e in b.events] for s, b in self.buffers.items()},
            "counters": {s: b.counter for s, b in self.buffers.items()},
            "collected": self.collected,
            "running": sorted(s.id for s in self.streams.values() if s.running),
            "attached": sorted(s.id for s in self.streams.values() if s.outbox is not None),
            "tickets": self.store.tickets(),
        }

    async def lab_state(self, request: Request) -> JSONResponse:
        return JSONResponse(self.state())

    async def lab_notify(self, request: Request) -> JSONResponse:
        """Send a `notifications/message` on a session's latest standalone GET stream."""
        session = request.query_params.get("session", "")
        stream = self.standalone.get(session)
        if stream is None or stream.outbox is None:
            return JSONResponse({"error": f"no live standalone stream for {session!r}"}, 409)
        params = {"level": "info", "logger": "seamwatch-lab", "data": request.query_params["text"]}
        event = self.publish(stream, notification("notifications/message", params))
        return JSONResponse({"event_id": event.id, "stream": stream.id})

    async def lab_settle(self, request: Request) -> JSONResponse:
        """Wait until no tool runs (and, with ?collected=1, no buffer is left)."""
        collected = request.query_params.get("collected") == "1"
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while any(s.running for s in self.streams.values()) or (collected and self.buffers):
            if time.monotonic() > deadline:
                return JSONResponse({"settled": False, **self.state()}, status_code=504)
            await asyncio.sleep(0.01)  # polls this process's own state, not the wire
        return JSONResponse({"settled": True, **self.state()})


def notification(method: str, params: Json) -> Json:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def rpc_result(request_id: object, result: Json, session: str) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return JSONResponse(body, headers={"mcp-session-id": session})


def rpc_error(request_id: object, code: int, text: str, *, status: int = 200) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
    return JSONResponse(body, status_code=status)


def served_by(app: Callable[[Scope, Receive, Send], Awaitable[None]], replica: str) -> Any:
    """ASGI middleware: `X-Served-By: <replica>` on every response."""
    header = (b"x-served-by", replica.encode())

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await app(scope, receive, send_with_header)

    return wrapped


def build_app(faults: Faults, store: SessionStore) -> Any:
    server = FaultServer(faults, store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = None
        if faults.buffer_ttl is not None:
            sweeper = asyncio.get_running_loop().create_task(server.sweep(faults.buffer_ttl))
        yield
        if sweeper is not None:
            sweeper.cancel()

    app = Starlette(
        routes=[
            Route(MCP_PATH, server.post, methods=["POST"]),
            Route(MCP_PATH, server.get, methods=["GET"]),
            Route(MCP_PATH, server.delete, methods=["DELETE"]),
            Route("/lab/state", server.lab_state, methods=["GET"]),
            Route("/lab/settle", server.lab_settle, methods=["POST"]),
            Route("/lab/notify", server.lab_notify, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return served_by(app, faults.replica)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.faults.server", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replica", default="replica", help="X-Served-By value")
    parser.add_argument("--store", type=Path, required=True, help="SQLite file of sessions")
    parser.add_argument("--session-prefix", default="lab", help="session ids are PREFIX-<n>")
    Faults.add_options(parser)
    args = parser.parse_args(argv)
    faults = Faults.from_options(args)
    app = build_app(faults, SessionStore(args.store, args.session_prefix))
    serve(app, args.port)


if __name__ == "__main__":
    main()
