"""double-delivery: one event carried twice, same id and payload, on the same HTTP response."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.double_delivery import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
UUID = "5d1e9f3a-2b7c-4d8e-9f0a-1b2c3d4e5f60"
RESULT = res(7, content=[{"type": "text", "text": "done"}])
OTHER = res(7, content=[{"type": "text", "text": "done again"}])


def counter(n: int) -> str:
    return f"e{n}"


def ts_id(n: int) -> str:
    return f"{UUID}_17500000001{n:02d}_r{n}"  # TypeScript SDK shape


def session(c: Capture) -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION))
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": "S1"})
    return {"Mcp-Session-Id": "S1", "MCP-Protocol-Version": VERSION}


def progress(n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken="p", progress=n)


def resumed_call(
    replay: list[tuple[int, object]], ids: Callable[[int], str] = counter
) -> Callable[[Capture], None]:
    """tools/call (id 7): priming, progress 1, then the client drops; one resume from the
    progress event whose answer carries `replay` ((id number, message or None for priming))."""

    def build(c: Capture) -> None:
        h = session(c)
        p = c.request(body=req("tools/call", 7, name="slow", arguments={}), headers=h)
        c.response(p, sse=True)
        c.chunk(p, sse(f"id: {ids(1)}\ndata: ", event(progress(1), id=ids(2))), n=0)
        c.end(p, "client_closed")
        g = c.request("GET", headers={**h, "Last-Event-ID": ids(2)})
        c.response(g, sse=True)
        for k, (n, message) in enumerate(replay):
            block = f"id: {ids(n)}\ndata: " if message is None else event(message, id=ids(n))
            c.chunk(g, sse(block), n=k)
        c.end(g, "complete")

    build.__name__ = "_".join(str(n) for n, _ in replay) + ("_ts" if ids is ts_id else "")
    return build


def standalone(blocks: list[tuple[str, object]]) -> Callable[[Capture], None]:
    """A standalone GET stream carrying `blocks` ((event id, message))."""

    def build(c: Capture) -> None:
        h = session(c)
        g = c.request("GET", headers=h)
        c.response(g, sse=True)
        for k, (event_id, message) in enumerate(blocks):
            c.chunk(g, sse(event(message, id=event_id)), n=k)
        c.end(g, "client_closed")

    build.__name__ = "get_" + "_".join(event_id for event_id, _ in blocks)
    return build


NOTE = req("notifications/message", level="info", data="disk full")

CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    # the report: the replayed response, then the same write again under the same id
    (resumed_call([(3, progress(2)), (4, RESULT), (4, RESULT)]), [("high", ["7"])]),
    (resumed_call([(3, progress(2)), (4, RESULT), (4, RESULT)], ts_id), [("high", ["7"])]),
    # a notification event carried twice
    (standalone([("n1", NOTE), ("n1", NOTE)]), [("medium", [])]),
    # near miss: the same response under two event ids (duplicate-response, cross-session-replay)
    (resumed_call([(4, RESULT), (5, RESULT)]), []),
    # near miss: the same id with another payload (duplicate-event-id, duplicate-response)
    (resumed_call([(4, RESULT), (5, OTHER)]), []),
    (standalone([("n1", NOTE), ("n1", progress(1))]), []),
    # near miss: equal notification payloads under fresh ids are new messages
    (standalone([("n1", NOTE), ("n2", NOTE)]), []),
    # clean: a correct replay of what the first incarnation carried, a new priming event after
    (resumed_call([(3, progress(2)), (4, RESULT)]), []),
    (resumed_call([(2, progress(1)), (3, progress(2)), (4, RESULT), (5, None)], ts_id), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["double-delivery"])
    assert found["detector"].to_list() == ["double-delivery"] * len(expected)
    got = [(row["severity"], row["request_ids"]) for row in found.iter_rows(named=True)]
    assert got == expected


def test_evidence() -> None:
    c = Capture()
    resumed_call([(3, progress(2)), (4, RESULT), (4, RESULT)])(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f3"]  # the resume's response
    assert row["stream_ids"] == ["f2"]  # an incarnation of the call's stream
    assert row["event_ids"] == ["e4"]
    assert "2 times" in row["detail"]
