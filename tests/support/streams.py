"""Named traffic builders for detector tests: sessions, event streams and resumes on `Capture`.

`records.py` writes single records; this module writes the exchanges detector tests build again
and again (a 2025-11-25 session, a tools/call answered with SSE, a `Last-Event-ID` resume), so
that a test's table reads as the traffic it stands for.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from analyzer.detectors import run_detectors
from tests.support.records import UPSTREAM, Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
S1 = {"Mcp-Session-Id": "S1"}


def findings(build: Callable[[Capture], None], detector: str, *, opened: bool) -> pl.DataFrame:
    """What `detector` alone finds in what `build` writes (after a capture_open if `opened`)."""
    c = Capture().open() if opened else Capture()
    build(c)
    return run_detectors(timeline_of(c), only=[detector])


# --- events -----------------------------------------------------------------------------------


def prime(i: str) -> str:
    """A priming event: an id and empty data."""
    return event(id=i, data="")


def progress(i: str, value: float, token: str = "t1") -> str:
    """A `notifications/progress` event."""
    return event(req("notifications/progress", progressToken=token, progress=value), id=i)


def note(i: str, text: str) -> str:
    """A `notifications/message` event."""
    return event(req("notifications/message", level="info", data=text), id=i)


# --- session S1, one chunk a stream -----------------------------------------------------------


def initialized(c: Capture) -> None:
    """initialize answered with JSON and session S1."""
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION, capabilities={}))
    c.response(f, body=res(0, protocolVersion=VERSION), headers=S1)


def stream(
    c: Capture,
    blocks: list[str],
    *,
    body: object = None,
    how: str = "complete",
    headers: dict[str, str] = S1,
) -> str:
    """A POST of `body` (a GET when None) answered with SSE: `blocks` in one chunk, then the end."""
    f = c.request("POST" if body is not None else "GET", body=body, headers=headers)
    c.response(f, sse=True)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, how)
    return f


# --- a session of one's own, one chunk an event -----------------------------------------------


class Session:
    """A sessioned (2025-11-25) client: initialize, streamed calls, resumes."""

    def __init__(self, c: Capture, sid: str) -> None:
        self.c, self.sid = c, sid
        f = c.request(body=req("initialize", 0, protocolVersion=VERSION, clientInfo={"name": "t"}))
        c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": sid})

    def headers(self, **more: str) -> dict[str, str]:
        return {"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": VERSION, **more}

    def open(
        self,
        rid: int | None = None,
        *,
        cursor: str | None = None,
        token: str | None = None,
        replica: str = UPSTREAM,
        status: int = 200,
    ) -> str:
        """Request a stream and record its response head (an event stream when 200).

        A tools/call `rid` (asking for progress on `token`, if given); without `rid` a GET: the
        resume from `cursor`, or the standalone stream.
        """
        if rid is None:
            resume = {} if cursor is None else {"Last-Event-ID": cursor}
            f = self.c.request("GET", headers=self.headers(**resume))
        else:
            meta = {} if token is None else {"_meta": {"progressToken": token}}
            body = req("tools/call", rid, name="report", arguments={}, **meta)
            f = self.c.request(body=body, headers=self.headers())
        self.c.response(f, status, sse=status == 200, replica=replica)
        return f

    def send(self, f: str, n: int, *blocks: str, end: str | None = None) -> None:
        """Chunk `n` of stream `f`, carrying `blocks`; then the stream's end, if given."""
        self.c.chunk(f, sse(*blocks), n=n)
        if end is not None:
            self.c.end(f, end)

    def _events(self, f: str, blocks: tuple[str, ...], end: str) -> str:
        for n, block in enumerate(blocks):
            self.send(f, n, block)
        self.c.end(f, end)
        return f

    def call(self, rid: int, *blocks: str, end: str = "client_closed", replica: str = "a") -> str:
        """tools/call `rid` with progress token t1, answered with `blocks`, one chunk each."""
        return self._events(self.open(rid, token="t1", replica=replica), blocks, end)

    def get(self, *blocks: str, end: str = "client_closed", replica: str = "a") -> str:
        """The standalone GET stream, carrying `blocks`, one chunk each."""
        return self._events(self.open(replica=replica), blocks, end)

    def resume(
        self,
        cursor: str,
        *blocks: str,
        end: str = "complete",
        replica: str = "a",
        status: int = 200,
    ) -> str:
        """A GET with `Last-Event-ID: cursor`, answered `status` with `blocks`, one chunk each."""
        f = self.open(cursor=cursor, replica=replica, status=status)
        return self._events(f, blocks, end)

    def cancel(self, rid: int) -> None:
        """`notifications/cancelled` for `rid`, answered 202."""
        body = req("notifications/cancelled", requestId=rid)
        self.c.response(self.c.request(body=body, headers=self.headers()), 202)


# --- two sessions, one event store ------------------------------------------------------------


def shared_store_two_answers(c: Capture) -> None:
    """Sessions A and B each call request 3; the server closes both streams after their priming
    events; one store, keyed by request id, replays both sessions' results (ids 3, 4; receipts
    A and B) on each resume (cross-session-replay's finding, not duplicate-response's)."""
    a, b = Session(c, "A"), Session(c, "B")
    a.call(3, prime("1"), end="server_closed")
    b.call(3, prime("2"), end="server_closed")
    answers = [event(res(3, content=[{"type": "text", "text": f"receipt {x}"}]), id=i)
               for i, x in (("3", "A"), ("4", "B"))]  # fmt: skip
    a.resume("1", *answers)
    b.resume("2", *answers)


# --- a response sent more than once (duplicate-response, analyzer/timeline/resent.py) ---------


def ticket_call(rid: int) -> dict[str, object]:
    """A side-effecting `tools/call` (create_ticket) with id `rid`."""
    return req("tools/call", rid, name="create_ticket", arguments={"title": "x"})


def replay_with_another_result(c: Capture) -> None:
    """The resume replays request 4's response with a different result."""
    initialized(c)
    stream(c, [event(id="e1", data=""), event(res(4, content=["T-1"]), id="e2")],
           body=ticket_call(4), how="client_closed")  # fmt: skip
    stream(c, [event(res(4, content=["T-2"]), id="e3")], headers={**S1, "Last-Event-ID": "e1"})


def response_on_two_streams(c: Capture) -> None:
    """Request 5's response went out on its POST stream and, fresh, on the standalone GET stream."""
    initialized(c)
    g = c.request("GET", headers=S1)
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="10", data="")), n=0)
    stream(c, [event(res(5, content=[]), id="11")], body=ticket_call(5))
    c.chunk(g, sse(event(res(5, content=[]), id="12")), n=1)
    c.end(g, "client_closed")
