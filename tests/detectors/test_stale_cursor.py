"""stale-cursor: a Last-Event-ID its session never issued (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.stale_cursor import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

UUID = "3d0f6c1a-8b2e-4f7d-a5c9-1e0b2d3c4f5a"
TS_ID = f"{UUID}_1750000000456_x7q2"  # the TypeScript SDK's <streamId>_<epoch-ms>_<rand>


def sid(s: str) -> dict[str, str]:
    return {"Mcp-Session-Id": s}


def initialize(c: Capture, s: str, *, cursor: str | None = None, ids: tuple[str, str] = ("", "")
               ) -> str:  # fmt: skip
    """initialize answered on an event stream (priming, result) that assigns session `s`."""
    headers = {"Last-Event-ID": cursor} if cursor is not None else {}
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"), headers=headers)
    c.response(f, sse=True, headers=sid(s))
    if ids[0]:
        c.chunk(f, sse(event(id=ids[0], data=""), event(res(0), id=ids[1])), n=0)
    else:
        c.chunk(f, sse(event(res(0))), n=0)
    c.end(f)
    return f


def call(c: Capture, s: str, rid: int, blocks: list[str], how: str = "complete") -> str:
    f = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=sid(s))
    c.response(f, sse=True)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, how)
    return f


def get(c: Capture, s: str, cursor: str, blocks: Sequence[str] = (), *,
        headers: dict[str, str] | None = None) -> str:  # fmt: skip
    f = c.request("GET", headers={**sid(s), "Last-Event-ID": cursor, **(headers or {})})
    c.response(f, sse=True)
    if blocks:
        c.chunk(f, sse(*blocks), n=0)
    c.end(f, "client_closed")
    return f


def note(n: int) -> dict[str, object]:
    return req("notifications/message", level="info", data=f"line {n}")


def carried_into_initialize(c: Capture) -> None:
    """The legacy-cursor-carryover case: session A's last id sent with B's initialize."""
    initialize(c, "A", ids=("1", "2"))
    call(c, "A", 1, [event(id="5", data=""), event(res(1, content=[]), id="6")])
    c.request("DELETE", headers=sid("A"))
    initialize(c, "B", cursor="6", ids=("7", "8"))


def foreign_cursor_on_get(c: Capture) -> None:
    initialize(c, "A")
    call(c, "A", 1, [event(id="e1", data=""), event(res(1, content=[]), id="e2")])
    initialize(c, "B")
    get(c, "B", "e2", [event(id="e9", data="")])


def foreign_cursor_honoured(c: Capture) -> None:
    """Session B's GET gets session A's messages after the cursor again: high."""
    initialize(c, "A")
    call(c, "A", 1, [event(note(n), id=f"{UUID}-{n}") for n in (1, 2, 3)], how="client_closed")
    initialize(c, "B")
    get(c, "B", f"{UUID}-1", [event(note(n), id=f"{UUID}-{n}") for n in (2, 3)])


def never_issued(c: Capture) -> None:
    initialize(c, "A")
    get(c, "A", "bGFzdC1ldmVudA==")


def never_issued_before_the_capture(c: Capture) -> None:
    """No initialize of S in the capture: the id may predate it (info)."""
    call(c, "S", 1, [event(res(1, content=[]), id="e40")])
    get(c, "S", "e17")


def sessionless_era(c: Capture) -> None:
    f = c.request(
        body=req("tools/call", 1, name="t", arguments={}),
        headers={"MCP-Protocol-Version": "2026-07-28", "Last-Event-ID": "42"},
    )
    c.response(f, body=res(1, content=[]))


def own_priming_cursor(c: Capture) -> None:
    """Clean: a resume from the priming event of this session's own stream."""
    initialize(c, "A", ids=(TS_ID, f"{UUID}_1750000000457_y8r3"))
    call(c, "A", 1, ["retry: 200\nid: p0\ndata: "], how="server_closed")
    get(c, "A", "p0", [event(res(1, content=[]), id="p1"), event(id="p2", data="")])


def own_cursor_with_ids_that_collide_across_sessions(c: Capture) -> None:
    """Per-session counters: B issued "2" itself, so its cursor "2" is its own."""
    initialize(c, "A", ids=("1", "2"))
    initialize(c, "B", ids=("1", "2"))
    get(c, "B", "2")


def carried_into_initialize_left_unanswered(c: Capture) -> None:
    initialize(c, "A", ids=("1", "2"))
    c.request(body=req("initialize", 0), headers={"Last-Event-ID": "2"})


def empty_cursor(c: Capture) -> None:
    initialize(c, "A")
    get(c, "A", "")


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    (carried_into_initialize, [("medium", ["6"])]),
    (foreign_cursor_on_get, [("medium", ["e2"])]),
    (foreign_cursor_honoured, [("high", [f"{UUID}-1", f"{UUID}-2", f"{UUID}-3"])]),
    (never_issued, [("medium", ["bGFzdC1ldmVudA=="])]),
    (never_issued_before_the_capture, [("info", ["e17"])]),
    (sessionless_era, [("info", ["42"])]),
    (carried_into_initialize_left_unanswered, [("medium", ["2"])]),
    (own_priming_cursor, []),
    (own_cursor_with_ids_that_collide_across_sessions, []),
    (empty_cursor, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["stale-cursor"])
    assert found["detector"].to_list() == ["stale-cursor"] * len(expected)
    assert (
        list(zip(found["severity"].to_list(), found["event_ids"].to_list(), strict=True))
        == expected
    )


def test_the_detail_names_the_issuing_session_and_the_opening_request() -> None:
    c = Capture()
    carried_into_initialize(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:B"
    assert (
        row["title"]
        == "cursor 6 issued only in session mcp:A, sent with the session-opening request"
    )
    assert "issued only in session mcp:A (stream f2, flow f2)" in row["detail"]
    assert "opened the session" in row["detail"]
    assert "drop cursors that predate the session" in row["detail"]
    assert "(stream f2, flow f2). The server answered 200. It came with" in row["detail"]
    assert row["flow_ids"] == ["f4", "f2"]  # the request carrying it, the flow that issued it
    assert row["stream_ids"] == ["f4", "f2"]
    assert row["first_ts"] < row["last_ts"]


def test_a_priming_cursor_of_another_session_is_still_stale() -> None:
    c = Capture()
    initialize(c, "A", ids=(UUID, "e1"))
    initialize(c, "B")
    get(c, "B", UUID)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert "a priming event" in row["detail"]
    assert "never issued" not in row["title"]


def test_a_cursor_issued_at_another_origin_is_never_issued_at_this_one() -> None:
    """A forward proxy's capture of two servers: B's session sent the cursor A issued. It is
    stale for B, but not one of another B session: A's sessions are not looked in."""
    a, b = "http://127.0.0.1:9001", "http://127.0.0.1:9002"
    c = Capture()
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"), origin=a)
    c.response(f, sse=True, headers=sid("A"))
    c.chunk(f, sse(event(id="e1", data=""), event(res(0), id="e2")), n=0)
    c.end(f)
    g = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"), origin=b)
    c.response(g, sse=True, headers=sid("B"))
    c.chunk(g, sse(event(res(0))), n=0)
    c.end(g)
    h = c.request("GET", headers={**sid("B"), "Last-Event-ID": "e2"}, origin=b)
    c.response(h, sse=True)
    c.end(h, "client_closed")
    (row,) = run_detectors(timeline_of(c), only=["stale-cursor"]).iter_rows(named=True)
    assert (row["session"], row["severity"]) == (f"mcp:B@{b}", "medium")
    assert row["title"] == f"cursor e2 never issued in any captured session at {b}, sent with GET"
    assert row["flow_ids"] == ["f3"]  # no issuing flow: f1 is another origin's
