"""A Streamable HTTP server that plays each matrix variant's wire choices, session by session.

One process serves every variant of a run. Before a variant's client sends `initialize` (or, in
the 2026-07-28 era, its first request), the run registers the variant with a direct control call
(`POST /lab/variant`, never through the proxy); the server then recognises the session by the
clientInfo name, which is the variant's name, and names the session `<variant>-<k>`.

Per session it does what the variant says (`lab.matrix.variants`):

- event ids from the variant's scheme (`17`, `evt-000017`, `<stream>_<n>`, UUID,
  `<stream>_<epoch-ms>_<rand>`, one constant id), a priming event in 2025-11-25 only;
- the session's first `tools/call` (or, for a variant whose stream owes no response, its first
  standalone GET) writes the priming event and `seen` messages, then holds the connection until
  the client closes it: the cut (or, when the server cuts, ends the response after a `retry:`
  on its priming event). The stream's remaining messages (and its response) were issued
  while the client was away;
- a resume (`GET` + `Last-Event-ID`) is answered as `answer` says: full replay, a ring buffer's
  tail, the full replay and then a second, different response to the same request, a fresh
  stream, a fresh stream whose id counter started again (a collected buffer), the
  due ids with other messages, an empty 200, a 200 with only a new priming event, 404 (the
  session ends), 409, a new stream that opens with a `stream-reset` control event
  (`{"resumed": false}`), or 400 telling the client to re-establish the stream without
  `Last-Event-ID`;
- `X-Served-By: replica-a` on every response, `replica-b` on the resume's answer when another
  replica answers it, and no header at all when the replica is hidden;
- the body written one event a chunk, all ready events in one chunk, each event cut in two
  mid-line, or gzip-compressed (`Content-Encoding: gzip`, flushed per event).

The families outside the resume's answer (`lab.matrix.variants.FAMILIES`) answer every resume
with the full replay; `after-delete` answers DELETE 200 and keeps the session, and
`response-on-get` ends the call's stream without its response and writes the response on the
session's standalone GET stream instead (the one cut-free call of its kind).

Later calls of a session run to their end with no cut (a re-issue after the fault).

    python -m lab.matrix.server --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import secrets
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from lab.faults.server import MCP_PATH, TOOLS, dumps, notification
from lab.matrix.variants import AFTER_CUT, MODERN_ERA, RETRY_MS, Variant
from lab.serving import serve

CUT_WAIT_S = 5.0
REPLICA, OTHER_REPLICA = "replica-a", "replica-b"
RESET_EVENT = "stream-reset"
REESTABLISH = "Last-Event-ID not honoured: re-establish the stream without it"

log = logging.getLogger("lab.matrix")

Json = dict[str, Any]


@dataclass(frozen=True)
class Frame:
    """One SSE event as written: an id (or none), an event type, data ("" for priming)."""

    id: str | None
    data: str
    event: str = "message"
    retry: int | None = None  # a `retry:` field (ms)

    @property
    def priming(self) -> bool:
        return not self.data

    def encode(self) -> bytes:
        lines = [] if self.priming else [f"event: {self.event}"]
        if self.id is not None:
            lines.append(f"id: {self.id}")
        if self.retry is not None:
            lines.append(f"retry: {self.retry}")
        lines.append(f"data: {self.data}")
        return ("\n".join(lines) + "\n\n").encode()


class IdScheme:
    """A session's event ids, in the variant's scheme; unique except for `constant`."""

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme
        self.counter = 0
        self.per_stream: dict[str, int] = {}

    def issue(self, stream: str) -> str:
        self.counter += 1
        self.per_stream[stream] = self.per_stream.get(stream, 0) + 1
        if self.scheme == "counter":
            return str(self.counter)
        if self.scheme == "padded":
            return f"evt-{self.counter:06d}"
        if self.scheme == "stream":
            return f"{stream}_{self.per_stream[stream]}"
        if self.scheme == "uuid":
            return str(uuid.uuid4())
        if self.scheme == "epoch":
            return f"{stream}_{time.time_ns() // 1_000_000}_{secrets.token_hex(3)}"
        return "0"  # constant: one id for every event


@dataclass(eq=False)
class CutStream:
    """The stream the variant cuts: every frame it issued, how many went out before the cut."""

    frames: list[Frame]
    written: int
    tag: str = ""  # the stream part of its ids (`<stream>_<n>`, `<stream>_<ms>_<rand>`)
    stalled: list[str] = field(default_factory=list)  # priming ids issued by stalled resumes
    gone: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(eq=False)
class Session:
    """One session (or, in 2026, one client's requests) and the variant it plays."""

    key: str
    variant: Variant
    ids: IdScheme
    cut: CutStream | None = None
    calls: int = 0
    get_tag: str = ""  # the stream part of the standalone GET stream's ids
    get_feed: asyncio.Queue[Frame] = field(default_factory=asyncio.Queue)

    def open_frames(self, stream: str) -> list[Frame]:
        """A new stream's opening: its priming event, in the era that has one."""
        return [Frame(self.ids.issue(stream), "")] if self.variant.priming else []

    def message(self, stream: str, message: Json, event: str = "message") -> Frame:
        return Frame(self.ids.issue(stream), dumps(message), event)


class SseBody:
    """An ASGI response writing frames as SSE in the variant's chunking; with `hold`, it keeps
    the connection open after them until the client leaves (the cut), writing what `feed`
    brings meanwhile."""

    def __init__(
        self,
        frames: list[Frame],
        *,
        chunking: str,
        headers: dict[str, str],
        hold: CutStream | None = None,
        feed: asyncio.Queue[Frame] | None = None,
    ) -> None:
        self.frames = frames
        self.feed = feed
        self.chunking = chunking
        self.headers = [(b"content-type", b"text/event-stream")]
        self.headers += [(k.encode(), v.encode()) for k, v in headers.items()]
        if chunking == "gzip":
            self.headers.append((b"content-encoding", b"gzip"))
        self.hold = hold

    def pieces(self, frames: list[Frame]) -> list[bytes]:
        encoded = [frame.encode() for frame in frames]
        if self.chunking == "several":
            return [b"".join(encoded)] if encoded else []
        if self.chunking == "midline":
            # Cut inside the `data:` field name, so the first piece ends mid-line.
            cuts = [raw.index(b"data:") + 3 for raw in encoded]
            return [
                part for raw, at in zip(encoded, cuts, strict=True) for part in (raw[:at], raw[at:])
            ]
        return encoded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        left = asyncio.ensure_future(_disconnected(receive))
        gzip = zlib.compressobj(wbits=31) if self.chunking == "gzip" else None

        async def write(frames: list[Frame]) -> None:
            for piece in self.pieces(frames):
                if gzip is not None:
                    piece = gzip.compress(piece) + gzip.flush(zlib.Z_SYNC_FLUSH)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                if self.chunking == "midline":
                    await asyncio.sleep(0.01)  # so the two halves leave as two writes

        try:
            await write(self.frames)
            if self.hold is not None:
                while self.feed is not None:
                    fed = asyncio.ensure_future(self.feed.get())
                    await asyncio.wait((fed, left), return_when=asyncio.FIRST_COMPLETED)
                    if not fed.done():
                        fed.cancel()
                        break
                    await write([fed.result()])
                await left  # the client closes the connection: the cut
                return
            tail = gzip.flush() if gzip is not None else b""
            await send({"type": "http.response.body", "body": tail, "more_body": False})
        except OSError:
            pass  # the client left early
        finally:
            left.cancel()
            if self.hold is not None:
                self.hold.gone.set()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class MatrixServer:
    """Variants registered for a run, and the sessions playing them."""

    def __init__(self) -> None:
        self.variants: dict[str, Variant] = {}
        self.sessions: dict[str, Session] = {}
        self.started: dict[str, int] = {}  # variant name -> sessions opened
        self.cut_done: set[str] = set()  # variants whose one cut has happened

    # --- helpers ----------------------------------------------------------------------

    def headers(self, session: Session, *, resume: bool = False) -> dict[str, str]:
        """The session id (sessioned eras) and the answering replica, unless it is hidden."""
        headers: dict[str, str] = {}
        if session.variant.era != MODERN_ERA:
            headers["mcp-session-id"] = session.key
        replica = session.variant.replica
        if replica != "hidden":
            headers["x-served-by"] = OTHER_REPLICA if resume and replica == "other" else REPLICA
        return headers

    def answer(
        self, session: Session, body: Json, status: int = 200, *, resume: bool = False
    ) -> JSONResponse:
        return JSONResponse(body, status_code=status, headers=self.headers(session, resume=resume))

    def open_session(self, name: str) -> Session | None:
        variant = self.variants.get(name)
        if variant is None:
            return None
        self.started[name] = self.started.get(name, 0) + 1
        key = f"{name}-{self.started[name]}"
        session = Session(key, variant, IdScheme(variant.ids))
        self.sessions[key] = session
        return session

    def messages(self, session: Session, stream: str, token: object, count: int) -> list[Frame]:
        """`count` messages of a call's or of the GET stream's work, as the variant says."""
        variant = session.variant
        frames: list[Frame] = []
        for step in range(1, count + 1):
            if variant.owed and variant.progress != "none":
                params: Json = {"progressToken": token, "progress": step}
                if variant.progress == "total":
                    params["total"] = count
                frames.append(
                    session.message(stream, notification("notifications/progress", params))
                )
            else:
                text = f"{variant.tool} step {step}" if variant.owed else f"note {step}"
                params = {"level": "info", "logger": "matrix", "data": text}
                frames.append(
                    session.message(stream, notification("notifications/message", params))
                )
        return frames

    def body(
        self,
        session: Session,
        frames: list[Frame],
        *,
        resume: bool = False,
        hold: CutStream | None = None,
    ) -> SseBody:
        """An SSE answer in the session's chunking (`resume`: the resume's replica answers)."""
        return SseBody(
            frames,
            chunking=session.variant.chunking,
            headers=self.headers(session, resume=resume),
            hold=hold,
        )

    # --- HTTP -------------------------------------------------------------------------

    async def post(self, request: Request) -> Response | SseBody:
        try:
            message = json.loads(await request.body())
        except ValueError:
            return refuse(rpc_error(None, -32700, "Parse error"), 400)
        if not isinstance(message, dict):
            return refuse(rpc_error(None, -32600, "one message a POST"), 400)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            name = str((params.get("clientInfo") or {}).get("name"))
            session = self.open_session(name)
            if session is None:
                return refuse(rpc_error(request_id, -32602, f"no variant {name}"), 400)
            result = {
                "protocolVersion": session.variant.era,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "seamwatch-lab-matrix", "version": "1"},
            }
            return self.answer(session, {"jsonrpc": "2.0", "id": request_id, "result": result})
        session_or_refusal = self.session_of(request, params)
        if isinstance(session_or_refusal, Response):
            return session_or_refusal
        session = session_or_refusal
        if method is None or "id" not in message:
            return Response(status_code=202, headers=self.headers(session))
        if method == "tools/list":
            return self.answer(
                session, {"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}}
            )
        if method != "tools/call":
            return self.answer(
                session, rpc_error(request_id, -32601, f"method not found: {method}")
            )
        return self.call(session, request_id, params)

    def call(self, session: Session, request_id: object, params: Json) -> SseBody:
        """A `tools/call` answered as SSE: the session's first is cut after `seen` messages."""
        variant = session.variant
        session.calls += 1
        tag = new_tag()
        token = (params.get("_meta") or {}).get("progressToken")
        frames = session.open_frames(tag)
        frames += self.messages(session, tag, token, variant.seen + AFTER_CUT)
        text = f"{variant.tool} done: {variant.name} call {session.calls}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        if variant.answer == "response-on-get" and session.calls == 1:
            # The fault: the call's stream ends without its response, which the standalone
            # GET stream carries instead (DESIGN.md §1: it MUST NOT).
            session.get_feed.put_nowait(session.message(session.get_tag, response))
            return self.body(session, frames)
        frames.append(session.message(tag, response))
        if variant.name not in self.cut_done and variant.answer != "response-on-get":
            return self.cut(session, frames, tag)
        return self.body(session, frames)

    def cut(self, session: Session, frames: list[Frame], tag: str) -> SseBody:
        written = session.variant.seen + (1 if session.variant.priming else 0)
        self.cut_done.add(session.variant.name)  # one cut a variant: later calls run whole
        session.cut = CutStream(frames, written, tag)
        log.info("%s: cut after %d of %d events", session.key, written, len(frames))
        if session.variant.cut == "client":
            return self.body(session, frames[:written], hold=session.cut)
        # The server ends the response after a `retry:` on its priming event (2025-11-25).
        first = dataclasses.replace(frames[0], retry=RETRY_MS[session.variant.cut])
        session.cut.gone.set()
        return self.body(session, [first, *frames[1:written]])

    async def get(self, request: Request) -> Response | SseBody:
        session_or_refusal = self.session_of(request, {})
        if isinstance(session_or_refusal, Response):
            return session_or_refusal
        session = session_or_refusal
        if session.variant.era == MODERN_ERA:
            return Response(status_code=405)
        cursor = request.headers.get("last-event-id")
        if cursor is None:
            tag = new_tag()
            if not session.variant.owed and session.variant.name not in self.cut_done:
                frames = session.open_frames(tag)
                frames += self.messages(session, tag, None, session.variant.seen + AFTER_CUT)
                return self.cut(session, frames, tag)
            session.get_tag = tag
            return SseBody(
                [*session.open_frames(tag), self.opened(session, tag)],
                chunking=session.variant.chunking,
                headers=self.headers(session),
                hold=CutStream([], 0),
                feed=session.get_feed,
            )
        return await self.resume(session, cursor)

    def opened(self, session: Session, tag: str) -> Frame:
        params = {"level": "info", "logger": "matrix", "data": {"stream": "opened"}}
        return session.message(tag, notification("notifications/message", params))

    async def resume(self, session: Session, cursor: str) -> Response | SseBody:
        cut = session.cut
        if cut is None:
            return self.answer(session, rpc_error(None, -32000, "nothing to resume"), 400)
        try:
            await asyncio.wait_for(cut.gone.wait(), CUT_WAIT_S)
        except TimeoutError:
            return self.answer(
                session, rpc_error(None, -32603, "the cut connection is still open"), 500
            )
        # The cursor's latest issue among what went out before the cut.
        positions = [i for i, frame in enumerate(cut.frames[: cut.written]) if frame.id == cursor]
        if cursor in cut.stalled:
            positions.append(cut.written - 1)  # a stalled answer delivered nothing past the cut
        if not positions:
            return self.answer(session, rpc_error(None, -32000, f"unknown cursor {cursor}"), 400)
        after = [frame for frame in cut.frames[positions[-1] + 1 :] if not frame.priming]
        answer = session.variant.answer
        log.info("%s: resume from %s answered %s", session.key, cursor, answer)
        if answer in ("full", "tail-seen", "after-delete", "superseded"):
            return self.body(session, after, resume=True)
        if answer == "answer-twice":
            # The tool ran again: a second, different result to the same request id.
            response = json.loads(after[-1].data)
            response["result"]["content"][0]["text"] += " (run again)"
            return self.body(session, [*after, session.message(cut.tag, response)], resume=True)
        if answer == "tail-unseen":
            # The ring kept only what followed the first two events issued after the cut.
            return self.body(session, cut.frames[cut.written + 2 :], resume=True)
        if answer == "fresh":
            tag = new_tag()
            return self.body(
                session, [*session.open_frames(tag), self.opened(session, tag)], resume=True
            )
        if answer == "restart":
            # The buffer was collected and its counter starts again, on the same stream.
            session.ids = IdScheme(session.variant.ids)
            frames = [*session.open_frames(cut.tag), self.opened(session, cut.tag)]
            return self.body(session, frames, resume=True)
        if answer == "other-payloads":
            frames = [Frame(frame.id, dumps(resync(n))) for n, frame in enumerate(after, start=1)]
            return self.body(session, frames, resume=True)
        if answer == "empty":
            return self.body(session, [], resume=True)
        if answer == "stall":
            # Only a new priming event on the resumed stream (none in eras without them).
            frames = session.open_frames(cut.tag)
            cut.stalled += [frame.id for frame in frames if frame.id is not None]
            return self.body(session, frames, resume=True)
        if answer == "honest-new":
            tag = new_tag()
            reset = Frame(session.ids.issue(tag), dumps({"resumed": False}), RESET_EVENT)
            frames = [reset] if session.variant.owed else [reset, self.opened(session, tag)]
            return self.body(session, frames, resume=True)
        headers = self.headers(session, resume=True)
        if answer == "404":
            self.sessions.pop(session.key, None)
            body = rpc_error(None, -32001, "Session not found")
            return JSONResponse(body, status_code=404, headers=headers)
        if answer == "409":
            body = rpc_error(None, -32000, "Conflict: the stream cannot be resumed")
            return JSONResponse(body, status_code=409, headers=headers)
        return JSONResponse(rpc_error(None, -32000, REESTABLISH), status_code=400, headers=headers)

    async def delete(self, request: Request) -> Response:
        session_or_refusal = self.session_of(request, {})
        if isinstance(session_or_refusal, Response):
            return session_or_refusal
        session = session_or_refusal
        if session.variant.answer != "after-delete":
            # The fault of `after-delete`: the DELETE is answered 2xx, and the session lives on
            # (another replica never heard of its termination).
            self.sessions.pop(session.key, None)
        return Response(status_code=200, headers=self.headers(session))

    def session_of(self, request: Request, params: Json) -> Session | Response:
        """The request's session: `Mcp-Session-Id`, or in 2026 the clientInfo of `_meta`."""
        key = request.headers.get("mcp-session-id")
        if key is None:
            meta = params.get("_meta") or {}
            name = str((meta.get("io.modelcontextprotocol/clientInfo") or {}).get("name"))
            variant = self.variants.get(name)
            if variant is None or variant.era != MODERN_ERA:
                return refuse(rpc_error(None, -32000, "Mcp-Session-Id is required"), 400)
            session = self.sessions.get(name)
            if session is None:
                session = Session(name, variant, IdScheme(variant.ids))
                self.sessions[name] = session
            return session
        session = self.sessions.get(key)
        if session is None:
            return refuse(rpc_error(None, -32001, "Session not found"), 404)
        return session

    # --- control plane ----------------------------------------------------------------

    async def lab_variant(self, request: Request) -> JSONResponse:
        """Register a variant before its client's first request (never through the proxy)."""
        try:
            variant = Variant.from_json(json.loads(await request.body()))
        except (ValueError, TypeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        self.variants[variant.name] = variant
        return JSONResponse({"name": variant.name})


def new_tag() -> str:
    """The stream part of a new stream's ids."""
    return secrets.token_hex(4)


def resync(n: int) -> Json:
    """The other message a due id carries in the `other-payloads` fault."""
    params = {"level": "info", "logger": "matrix", "data": f"resync {n}"}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}


def rpc_error(request_id: object, code: int, text: str) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def refuse(body: Json, status: int) -> JSONResponse:
    """An answer outside any variant's session (no session, an unknown variant)."""
    return JSONResponse(body, status_code=status, headers={"x-served-by": REPLICA})


def build_app() -> Starlette:
    server = MatrixServer()
    return Starlette(
        routes=[
            Route(MCP_PATH, server.post, methods=["POST"]),
            Route(MCP_PATH, server.get, methods=["GET"]),
            Route(MCP_PATH, server.delete, methods=["DELETE"]),
            Route("/lab/variant", server.lab_variant, methods=["POST"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.matrix.server", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(build_app(), args.port)


if __name__ == "__main__":
    main()
