"""superseded-stream: a replaced standalone GET stream resumed (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.superseded_stream import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
UUID = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"


def note(n: int) -> dict[str, object]:
    return req("notifications/message", level="info", data=f"announcement {n}")


def initialized(c: Capture, sid: str = "S1") -> None:
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"))
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": sid})


def stream(c: Capture, ids: list[str], *, cursor: str | None = None, how: str | None = "complete",
           headers: dict[str, str] = S1) -> str:  # fmt: skip
    """A standalone GET (a resume when `cursor` is set) carrying one message per id."""
    extra = {"Last-Event-ID": cursor} if cursor is not None else {}
    f = c.request("GET", headers={**headers, **extra})
    c.response(f, sse=True)
    if ids:
        c.chunk(f, sse(*(event(note(n), id=i) for n, i in enumerate(ids))), n=0)
    if how is not None:
        c.end(f, how)
    return f


def replaced_then_resumed(c: Capture) -> None:
    """The superseded-stream scenario: stream 1 closed by the server, stream 2, resume of 1."""
    initialized(c)
    stream(c, ["4", "7"])
    stream(c, [], how=None)
    stream(c, [], cursor="7")


def both_connected_then_resumed(c: Capture) -> None:
    """The server kept stream 1 while stream 2 opened (several streams are allowed): low."""
    initialized(c)
    g1 = c.request("GET", headers=S1)
    c.response(g1, sse=True)
    c.chunk(g1, sse(event(note(1), id=f"{UUID}_1750000000001_aa")), n=0)
    stream(c, [f"{UUID}_1750000000002_bb"], how=None)
    c.end(g1, "client_closed")
    stream(c, [], cursor=f"{UUID}_1750000000001_aa")


def resumed_twice_after_replacement(c: Capture) -> None:
    """One finding for the replaced stream, with both cursors."""
    initialized(c)
    stream(c, ["e1", "e2"], how="server_closed")
    stream(c, ["e3"], how=None)
    stream(c, [], cursor="e2")
    stream(c, [], cursor="e1")


def resume_refused_after_replacement(c: Capture) -> None:
    """The server answers 409: nothing replayed, the client still held a stale cursor (low)."""
    initialized(c)
    stream(c, ["bWVzc2FnZS0x"], how="server_closed")
    stream(c, [], how=None)
    f = c.request("GET", headers={**S1, "Last-Event-ID": "bWVzc2FnZS0x"})
    c.response(f, 409)


def resumed_before_replacement(c: Capture) -> None:
    """Clean: stream 1 breaks and is resumed; a new GET stream opens only later."""
    initialized(c)
    stream(c, ["e1", "e2"], how="server_closed")
    stream(c, ["e3"], cursor="e2")
    stream(c, [UUID], how=None)


def latest_stream_resumed(c: Capture) -> None:
    initialized(c)
    stream(c, ["1"])
    stream(c, ["2"], how="server_closed")
    stream(c, ["3"], cursor="2")


def post_stream_resumed_after_a_get(c: Capture) -> None:
    """POST streams are never superseded by a GET stream."""
    initialized(c)
    p = c.request(body=req("tools/call", 3, name="t", arguments={}), headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse("retry: 100\nid: c0\ndata: "), n=0)
    c.end(p, "server_closed")
    stream(c, ["g1"], how=None)
    f = c.request("GET", headers={**S1, "Last-Event-ID": "c0"})
    c.response(f, sse=True)
    c.chunk(f, sse(event(res(3, content=[]), id="c1"), event(id="c2", data="")), n=0)
    c.end(f)


def newer_stream_of_another_session(c: Capture) -> None:
    initialized(c, "S1")
    stream(c, ["x1"])
    initialized(c, "S2")
    stream(c, ["y1"], how=None, headers={"Mcp-Session-Id": "S2"})
    stream(c, [], cursor="x1")


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    (replaced_then_resumed, [("medium", ["7"])]),
    (both_connected_then_resumed, [("low", [f"{UUID}_1750000000001_aa"])]),
    (resumed_twice_after_replacement, [("medium", ["e2", "e1"])]),
    (resume_refused_after_replacement, [("low", ["bWVzc2FnZS0x"])]),
    (resumed_before_replacement, []),
    (latest_stream_resumed, []),
    (post_stream_resumed_after_a_get, []),
    (newer_stream_of_another_session, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["superseded-stream"])
    assert found["detector"].to_list() == ["superseded-stream"] * len(expected)
    assert list(zip(found["severity"].to_list(), found["event_ids"].to_list(), strict=True)) == (
        expected
    )


def test_evidence_names_the_replaced_and_the_newer_stream() -> None:
    c = Capture()
    replaced_then_resumed(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["stream_ids"] == ["f2", "f3"]
    assert row["flow_ids"] == ["f4"]
    assert "GET stream f3 had replaced it" in row["detail"]
    assert "resume only the latest standalone stream" in row["detail"]
    assert row["era"] == "2025-11-25"
