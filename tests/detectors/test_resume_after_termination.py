"""resume-after-termination: a request or resume accepted after its session ended."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.resume_after_termination import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
UUID = "7c4e2a90-1b3d-4f5e-8a6b-9c0d1e2f3a4b"
TS = f"{UUID}_1750000000456_z3k"  # TypeScript SDK shape


def session(c: Capture, sid: str) -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION))
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": sid})
    return {"Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}


def streamed_call(c: Capture, h: dict[str, str], rid: int, cursor: str) -> str:
    p = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=h)
    c.response(p, sse=True)
    c.chunk(p, sse(event(id=cursor, data="")), n=0)
    c.end(p, "server_closed")
    return p


def resume(c: Capture, h: dict[str, str], cursor: str, rid: int, status: int = 200) -> str:
    g = c.request("GET", headers={**h, "Last-Event-ID": cursor})
    c.response(g, status, sse=status == 200)
    if status == 200:
        c.chunk(g, sse(event(res(rid, content=[]), id=f"{cursor}.1")), n=0)
        c.end(g)
    return g


def delete(c: Capture, h: dict[str, str], status: int = 200) -> None:
    d = c.request("DELETE", headers=h)
    c.response(d, status)


def resumed_after_delete(c: Capture) -> None:
    h = session(c, "S1")
    streamed_call(c, h, 1, TS)
    delete(c, h)
    resume(c, h, TS, 1)


def request_after_404(c: Capture) -> None:
    h = session(c, "c2hhcmVkLXNlc3Npb24=")
    f = c.request(body=req("tools/list", 1), headers=h)
    c.response(f, 404)
    f = c.request(body=req("tools/list", 2), headers=h)
    c.response(f, body=res(2, tools=[]))


def in_flight_at_delete(c: Capture) -> None:
    """A call sent before the DELETE and answered after it: not flagged."""
    h = session(c, "S1")
    p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=h)
    delete(c, h)
    c.response(p, body=res(1, content=[]))


def refused_after_delete(c: Capture) -> None:
    h = session(c, "S1")
    streamed_call(c, h, 1, "e7")
    delete(c, h)
    resume(c, h, "e7", 1, status=404)


def delete_not_allowed(c: Capture) -> None:
    """405: the session did not end."""
    h = session(c, "S1")
    streamed_call(c, h, 1, "17")
    delete(c, h, status=405)
    resume(c, h, "17", 1)


def reinitialized_after_404(c: Capture) -> None:
    h = session(c, "S1")
    f = c.request(body=req("tools/list", 1), headers=h)
    c.response(f, 404)
    h2 = session(c, UUID)
    f = c.request(body=req("tools/list", 2), headers=h2)
    c.response(f, body=res(2, tools=[]))


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, str, list[str], list[str]]]]] = [
    (resumed_after_delete, [("high", "mcp:S1", [TS], [])]),
    (request_after_404, [("high", "mcp:c2hhcmVkLXNlc3Npb24=", [], ["2"])]),
    (in_flight_at_delete, []),
    (refused_after_delete, []),
    (delete_not_allowed, []),
    (reinitialized_after_404, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(
    build: Callable[[Capture], None], expected: list[tuple[str, str, list[str], list[str]]]
) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["resume-after-termination"])
    assert found["detector"].to_list() == ["resume-after-termination"] * len(expected)
    assert found.select("severity", "session", "event_ids", "request_ids").rows() == expected


def test_detail_names_the_end_and_the_accepted_flows() -> None:
    c = Capture()
    resumed_after_delete(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["flow_ids"] == ["f3", "f4"]
    assert row["stream_ids"] == ["f2"]
    assert "ended with a DELETE answered 2xx (flow f3)" in row["detail"]
    assert "answer 404 to every request of an ended session" in row["detail"]
