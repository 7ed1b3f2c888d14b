"""retry-violation: a resume sooner than the last `retry:` of a stream the server closed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.retry_violation import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
UUID = "3f2b8c1e-9d4a-4e7b-a6c5-0d1e2f3a4b5c"
TS = f"{UUID}_1750000000123_q7x"  # TypeScript SDK shape


def session(c: Capture, sid: str = "S1") -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION), at=0)
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": sid})
    return {"Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}


def polled(
    cursor: str, *, retry: int | None, end: str, wait: float, at: float = 10
) -> Callable[[Capture], None]:
    """A tools/call stream priming `cursor` (with `retry`), ended `end`, resumed `wait` ms later."""

    def build(c: Capture) -> None:
        h = session(c)
        p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=h, at=at)
        c.response(p, sse=True)
        field = f"retry: {retry}\n" if retry is not None else ""
        c.chunk(p, sse(field + f"id: {cursor}\ndata: "), n=0)
        c.end(p, end, at=at + 5)
        g = c.request("GET", headers={**h, "Last-Event-ID": cursor}, at=at + 5 + wait)
        c.response(g, sse=True)
        c.chunk(g, sse(event(res(1, content=[]), id=f"{cursor}-r"), event(id="p2", data="")), n=0)
        c.end(g)

    build.__name__ = f"{end}_retry{retry}_wait{wait}"
    return build


def retry_on_a_replay_then_early(c: Capture) -> None:
    """The retry of an earlier incarnation still holds for the next resume (last one seen)."""
    h = session(c)
    p = c.request(body=req("tools/call", 2, name="t", arguments={}), headers=h, at=10)
    c.response(p, sse=True)
    c.chunk(p, sse("retry: 1000\nid: 7\ndata: "), n=0)
    c.end(p, "server_closed", at=20)
    g = c.request("GET", headers={**h, "Last-Event-ID": "7"}, at=1100)
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="8", data="")), n=0)
    c.end(g, "complete", at=1110)
    g2 = c.request("GET", headers={**h, "Last-Event-ID": "8"}, at=1200)
    c.response(g2, sse=True)
    c.chunk(g2, sse(event(res(2, content=[]), id="9")), n=0)
    c.end(g2)


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    (polled("e7", retry=300, end="server_closed", wait=50), [("medium", ["e7"])]),
    (polled(TS, retry=300, end="complete", wait=100), [("medium", [TS])]),
    (retry_on_a_replay_then_early, [("medium", ["8"])]),
    # near miss: within the 10% tolerance, or after the wait
    (polled(UUID, retry=300, end="complete", wait=280), []),
    (polled("e7", retry=300, end="server_closed", wait=310), []),
    # the client closed the stream: it may resume at once
    (polled("17", retry=300, end="client_closed", wait=1), []),
    # no retry was ever sent
    (polled("17", retry=None, end="server_closed", wait=1), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["retry-violation"])
    assert found["detector"].to_list() == ["retry-violation"] * len(expected)
    assert list(zip(found["severity"].to_list(), found["event_ids"].to_list(), strict=True)) == (
        expected
    )


def test_threshold_and_evidence() -> None:
    c = Capture()
    polled("e7", retry=300, end="server_closed", wait=200)(c)
    timeline = timeline_of(c)
    row = DETECTOR.detect(timeline).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["stream_ids"] == ["f2"]
    assert row["flow_ids"] == ["f2", "f3"]
    assert "200.0 ms later" in row["detail"] and "retry: 300" in row["detail"]
    assert DETECTOR.detect(timeline, tolerance=0.5).collect().is_empty()


def test_resume_while_the_stream_is_still_open_is_not_a_reconnect() -> None:
    c = Capture()
    h = session(c)
    p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=h, at=10)
    c.response(p, sse=True)
    c.chunk(p, sse("retry: 300\nid: 0bWF\ndata: "), n=0)
    g = c.request("GET", headers={**h, "Last-Event-ID": "0bWF"}, at=20)
    c.end(p, "server_closed", at=30)
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(1, content=[]), id="0bWG")), n=0)
    c.end(g)
    assert DETECTOR.detect(timeline_of(c)).collect().is_empty()
