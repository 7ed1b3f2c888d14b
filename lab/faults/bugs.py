"""A purpose-built server that shows, one switch each, resumption bugs reported against MCP SDKs.

It is `lab.faults.server`'s fault server (sessions in a shared SQLite file, a per-process event
buffer, `slow_report` / `create_ticket` tools answering SSE when asked for progress, the same
control plane) with one `--bug` changing what a resume does. Each bug is rebuilt from its
report's wire behaviour, never from the project's code:

- `split-stream-id` (typescript-sdk #943 / #2560): event ids are `<stream key>_<uuid>` and the
  standalone stream's key is `_GET_stream`. A resume recovers the stream key as the cursor's
  text before its first `_`, which is empty for every standalone-stream id: nothing is
  replayed, the answer is 200 and the new connection is registered under the empty key, where
  it receives keep-alive comments only. Later standalone notifications go to `_GET_stream`,
  which has no connection any more: they are buffered and never sent.
- `empty-get` (python-sdk #3257): a `GET` without a cursor is answered 200 with an event stream
  the server ends at once, with no event.
- `replace-resume` (punkpeye/fastmcp #331): a resume attaches its connection to the stream
  without checking for a live one; the earlier connection is neither fed nor closed.
- `clear-final` (cloudflare/agents #1607): issuing a stream's final response clears every event
  of that stream from the buffer; a resume then finds nothing and is answered 200, empty.
- `no-shared-store` (python-sdk #2570): a resume whose cursor this process never issued (it
  went to another replica) is answered 200, empty: there is no store shared by replicas.
- `past-end` (go-sdk #1131 / PR #1132): ids are `<stream key>_<index>` (the standalone
  stream's key is empty, so `_0`, `_1`, ...); a cursor whose index is past the end of its
  stream's log is answered 200 with an empty replay and the connection joins the stream.
- `replay-twice` (typescript-sdk #2547, review): a resume replays the stored events of the
  stream, the response included; then the send that stored the response, parked until now,
  finds the resumed connection and writes the response again under the same event id.

    python -m lab.faults.bugs --port 8001 --replica bugs --store sessions.sqlite3 \
        --bug split-stream-id
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lab.faults.server import (
    MCP_PATH,
    Event,
    EventBuffer,
    Faults,
    FaultServer,
    SessionStore,
    SseResponse,
    Stream,
    notification,
    served_by,
)
from lab.serving import serve

BUGS = (
    "split-stream-id",
    "empty-get",
    "replace-resume",
    "clear-final",
    "no-shared-store",
    "past-end",
    "replay-twice",
)
KEEP_ALIVE_S = 0.2
STANDALONE_KEY = {"split-stream-id": "_GET_stream", "past-end": ""}

log = logging.getLogger("lab.faults.bugs")


@dataclass(frozen=True)
class LabelledEvent(Event):
    """An event whose id is a label made when it was issued, not `e<n>`."""

    label: str = ""

    @property
    def id(self) -> str:
        return self.label


@dataclass(frozen=True)
class KeepAlive(Event):
    """An SSE comment: keeps the connection looking alive, carries no event."""

    def frame(self, with_id: bool = True) -> bytes:
        return b": keep-alive\n\n"


class LabelledBuffer(EventBuffer):
    """A session's buffer issuing ids from `label(stream, n)`."""

    def __init__(self, label: Callable[[str, int], str]) -> None:
        super().__init__(None)
        self.label = label

    def issue(self, stream: str, data: str, retry: int | None = None) -> Event:
        self.counter += 1
        event = LabelledEvent(self.counter, stream, data, retry, self.label(stream, self.counter))
        self.events.append(event)
        return event


class BugServer(FaultServer):
    """The fault server with one reported bug in how it resumes streams."""

    def __init__(self, faults: Faults, store: SessionStore, bug: str) -> None:
        super().__init__(faults, store)
        self.bug = bug
        self.keys: dict[str, str] = {}  # stream id -> its key in event ids
        self.indexes: dict[str, int] = {}  # stream id -> events issued on it (past-end)
        self.release = asyncio.Event()  # replace-resume: the paused tool goes on when set
        self.opening_standalone = False

    # --- event ids ------------------------------------------------------------------------

    def buffer(self, session: str) -> EventBuffer:
        if session not in self.buffers and self.bug in STANDALONE_KEY:
            self.buffers[session] = LabelledBuffer(self.label)
        return super().buffer(session)

    def label(self, stream: str, n: int) -> str:
        if stream not in self.keys:
            standalone = self.opening_standalone
            self.keys[stream] = (
                STANDALONE_KEY[self.bug]
                if standalone
                else str(uuid.uuid5(uuid.NAMESPACE_URL, stream))
            )
        key = self.keys[stream]
        if self.bug == "past-end":
            index = self.indexes.get(stream, 0)
            self.indexes[stream] = index + 1
            return f"{key}_{index}"
        # Deterministic per stream and counter, shaped like the example store's random part.
        return f"{key}_{uuid.uuid5(uuid.NAMESPACE_URL, f'{stream}/{n}')}"

    # --- what goes wrong ------------------------------------------------------------------

    def publish(self, stream: Stream, message: dict[str, Any], *, final: bool = False) -> Event:
        event = super().publish(stream, message, final=final)
        if final and self.bug == "clear-final":
            # The bug: the stream is cleared once its final response is stored.
            buffer = self.buffer(stream.session)
            buffer.events = deque(e for e in buffer.events if e.stream != stream.id)
            log.info("%s: %s cleared with its final response", self.faults.replica, stream.id)
        return event

    async def stream_call(
        self,
        stream: Stream,
        request_id: object,
        token: object,
        result: dict[str, Any],
        steps: int,
        again: Callable[[], dict[str, Any]],
    ) -> None:
        if self.bug != "replace-resume" or self.streamed_calls:
            await super().stream_call(stream, request_id, token, result, steps, again)
            return
        # The tool goes on after `--pause-after` steps only once the scenario has resumed
        # twice (`/lab/release`), so what follows shows which connection is fed.
        self.streamed_calls += 1
        try:
            for step in range(1, steps + 1):
                if step == (self.faults.pause_after or 0) + 1:
                    await self.release.wait()
                progress = {"progressToken": token, "progress": step, "total": steps}
                self.publish(stream, notification("notifications/progress", progress))
            response = {"jsonrpc": "2.0", "id": request_id, "result": result}
            self.publish(stream, response, final=True)
        finally:
            stream.running = False

    async def get(self, request: Request) -> Response | SseResponse:
        session, refusal = self.session_of(request)
        if refusal is not None:
            return refusal
        cursor = request.headers.get("last-event-id")
        headers = {"mcp-session-id": session}
        if cursor is None:
            if self.bug == "empty-get":
                log.info("%s: GET answered with an empty stream", self.faults.replica)
                return Response(b"", media_type="text/event-stream", headers=headers)
            return await self.open_standalone(session)
        events = list(self.buffer(session).events)
        found = next((e for e in events if e.id == cursor), None)
        if self.bug == "split-stream-id":
            key = cursor.split("_")[0]  # the bug: "_GET_stream_<uuid>" gives ""
            owner = next((s for s, k in self.keys.items() if k == key and key), None)
            if owner is None:
                log.info(
                    "%s: resume from %s: no stream for key %r", self.faults.replica, cursor, key
                )
                return self.keep_alive(Stream(f"{self.faults.replica}/key:{key}", session))
        if self.bug == "past-end":
            key, _, index = cursor.rpartition("_")
            owner = next((s for s, k in self.keys.items() if k == key), None)
            if found is None and owner is not None and index.isdigit():
                # The bug: an index past the log's end is an empty replay, not an error.
                log.info(
                    "%s: resume from %s past the end of %s", self.faults.replica, cursor, owner
                )
                return self.join(self.streams[owner], [])
        if found is None:
            log.info("%s: resume from unknown %s: 200, empty", self.faults.replica, cursor)
            return Response(b"", media_type="text/event-stream", headers=headers)
        stream = self.streams[found.stream]
        tail = [e for e in events if e.stream == stream.id and e.n > found.n and e.data]
        log.info("%s: resume from %s replays %s", self.faults.replica, cursor, [e.id for e in tail])
        if self.bug == "replace-resume":
            return self.join(stream, tail)
        if self.bug == "replay-twice" and stream.finished and tail:
            # The bug: the parked send of the response writes it again after the replay.
            return self.join(stream, [*tail, tail[-1]], end=True)
        return self.replay(stream, tail)

    async def open_standalone(self, session: str) -> SseResponse:
        self.opening_standalone = True  # its ids take the standalone stream's key
        try:
            stream, outbox = self.open_stream(session)
        finally:
            self.opening_standalone = False
        self.standalone[session] = stream
        params = {"level": "info", "logger": "seamwatch-lab", "data": "standalone stream open"}
        self.publish(stream, notification("notifications/message", params))
        return SseResponse(self, stream, outbox)

    def join(self, stream: Stream, tail: list[Event], *, end: bool = False) -> SseResponse:
        """Attach a new connection to `stream` (an earlier one is left as it is), send `tail`."""
        outbox = stream.attach()
        for event in tail:
            outbox.put_nowait(event)
        if end or stream.finished:
            outbox.put_nowait(None)
        return SseResponse(self, stream, outbox)

    def keep_alive(self, stream: Stream) -> SseResponse:
        """A connection under a stream nobody publishes to: keep-alive comments only."""
        outbox = stream.attach()

        async def ping() -> None:
            while not stream.gone.is_set():
                outbox.put_nowait(KeepAlive(0, stream.id, ""))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stream.gone.wait(), KEEP_ALIVE_S)

        task = asyncio.get_running_loop().create_task(ping())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return SseResponse(self, stream, outbox)

    # --- control plane --------------------------------------------------------------------

    async def lab_notify(self, request: Request) -> JSONResponse:
        """A `notifications/message` on the session's standalone stream, connected or not."""
        session = request.query_params.get("session", "")
        stream = self.standalone.get(session)
        if stream is None:
            return JSONResponse({"error": f"no standalone stream for {session!r}"}, 409)
        params = {"level": "info", "logger": "seamwatch-lab", "data": request.query_params["text"]}
        sent = stream.outbox is not None
        event = self.publish(stream, notification("notifications/message", params))
        return JSONResponse({"event_id": event.id, "stream": stream.id, "sent": sent})

    async def lab_release(self, request: Request) -> JSONResponse:
        """Let a tool paused by `replace-resume` go on."""
        self.release.set()
        return JSONResponse({"released": True})


def build_app(faults: Faults, store: SessionStore, bug: str) -> Any:
    server = BugServer(faults, store, bug)
    app = Starlette(
        routes=[
            Route(MCP_PATH, server.post, methods=["POST"]),
            Route(MCP_PATH, server.get, methods=["GET"]),
            Route(MCP_PATH, server.delete, methods=["DELETE"]),
            Route("/lab/state", server.lab_state, methods=["GET"]),
            Route("/lab/settle", server.lab_settle, methods=["POST"]),
            Route("/lab/notify", server.lab_notify, methods=["POST"]),
            Route("/lab/release", server.lab_release, methods=["POST"]),
        ]
    )
    return served_by(app, faults.replica)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.faults.bugs", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replica", default="bugs", help="X-Served-By value")
    parser.add_argument("--store", type=Path, required=True, help="SQLite file of sessions")
    parser.add_argument("--session-prefix", default="bug", help="session ids are PREFIX-<n>")
    parser.add_argument("--bug", choices=BUGS, required=True, help="the reported bug to show")
    parser.add_argument("--pause-after", type=int, help="first streamed call waits after K steps")
    args = parser.parse_args(argv)
    faults = Faults(args.replica, pause_after=args.pause_after)
    app = build_app(faults, SessionStore(args.store, args.session_prefix), args.bug)
    serve(app, args.port)


if __name__ == "__main__":
    main()
