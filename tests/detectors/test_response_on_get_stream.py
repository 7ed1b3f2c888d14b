"""response-on-get-stream: a response on a standalone GET stream (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.response_on_get_stream import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
UUID = "0b6c3f8e-5a1d-4e2f-9c7b-8d6a5e4f3c2b"


def initialized(c: Capture) -> None:
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers=S1)


def get_stream(c: Capture, blocks: list[str], headers: dict[str, str] = S1) -> str:
    g = c.request("GET", headers=headers)
    c.response(g, sse=True)
    c.chunk(g, sse(*blocks), n=0)
    c.end(g, "client_closed")
    return g


def response_on_standalone_get(c: Capture) -> None:
    initialized(c)
    p = c.request(body=req("tools/call", 4, name="t", arguments={}), headers=S1)
    c.response(p, 202)
    get_stream(c, [event(id="g0", data=""), event(res(4, content=[]), id="g1")])


def null_id_parse_error(c: Capture) -> None:
    initialized(c)
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}
    get_stream(c, [event(error, id="17")])


def stale_cursor_get(c: Capture) -> None:
    """A GET with a cursor its session never issued opens a new stream: not an incarnation."""
    initialized(c)
    get_stream(c, [event(res(2, tools=[]), id=f"{UUID}_1750000000009_q")],
               headers={**S1, "Last-Event-ID": "never-issued"})  # fmt: skip


def replay_on_get_incarnation(c: Capture) -> None:
    """Clean: the POST stream broke; its response is replayed on a GET incarnation."""
    initialized(c)
    p = c.request(body=req("tools/call", 3, name="t", arguments={}), headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse(event(id=UUID, data="")), n=0)
    c.end(p, "server_closed")
    get_stream(c, [event(res(3, content=[]), id="7c1e")], headers={**S1, "Last-Event-ID": UUID})


def notifications_on_get(c: Capture) -> None:
    """Clean: a standalone GET stream carrying notifications and server requests only."""
    initialized(c)
    get_stream(c, [event(id="e0", data=""), event(req("notifications/tools/list_changed"),
               id="e1"), event(req("sampling/createMessage", 1), id="e2")])  # fmt: skip


def legacy_sse(c: Capture) -> None:
    """Clean: legacy HTTP+SSE carries every response on its one GET stream."""
    g = c.request("GET", "/sse")
    c.response(g, sse=True)
    c.chunk(g, sse(event("/messages?session_id=abc", event="endpoint")), n=0)
    p = c.request(
        body=req("initialize", 0, protocolVersion="2024-11-05", capabilities={}),
        path="/messages",
    )
    c.records[-1]["path"] = "/messages?session_id=abc"
    c.response(p, 202)
    c.chunk(g, sse(event(res(0, protocolVersion="2024-11-05"))), n=1)
    c.end(g, "client_closed")


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    (response_on_standalone_get, [("medium", ["4"])]),
    (null_id_parse_error, [("low", [])]),
    (stale_cursor_get, [("medium", ["2"])]),
    (replay_on_get_incarnation, []),
    (notifications_on_get, []),
    (legacy_sse, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["response-on-get-stream"])
    assert found["detector"].to_list() == ["response-on-get-stream"] * len(expected)
    assert [(s, list(r)) for s, r in found.select("severity", "request_ids").rows()] == expected


def test_evidence_and_detail() -> None:
    c = Capture()
    response_on_standalone_get(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f3"] and row["stream_ids"] == ["f3"]
    assert row["event_ids"] == ["g1"]
    assert row["title"] == "response 4 on standalone GET stream f3"
    assert "opened without a cursor" in row["detail"] and "POST stream" in row["detail"]
