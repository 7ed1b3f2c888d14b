"""analyzer.timeline.answers: which request each answer answers (`rpc_messages.answers`)."""

from __future__ import annotations

import polars as pl

from tests.support.records import Capture, event, req, res, rows, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
V26 = {"MCP-Protocol-Version": "2026-07-28"}


def _answers(c: Capture) -> list[tuple[str, str, str | None]]:
    """(flow, request id, answers) of every answer, in capture order."""
    frame = timeline_of(c).rpc_messages.filter(pl.col("direction") == "s2c").sort("seq")
    return rows(frame, "flow_id", "rpc_id", "answers")


def _initialized(c: Capture) -> None:
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers=S1)


def _call(c: Capture, rid: int, headers: dict[str, str] = S1) -> str:
    return c.request(body=req("tools/call", rid, name="t", arguments={}), headers=headers)


def test_a_reused_id_is_answered_on_each_request_own_stream() -> None:
    c = Capture()
    _initialized(c)
    a = _call(c, 1)
    b = _call(c, 1)  # sent before a's answer: ids recur, each stream answers its own
    c.response(b, sse=True)
    c.response(a, body=res(1, content=["a"]))
    c.chunk(b, sse(event(id="b0", data="")), n=0)
    c.end(b, "server_closed")
    r = c.request("GET", headers={**S1, "Last-Event-ID": "b0"})  # b's stream, resumed
    c.response(r, sse=True)
    c.chunk(r, sse(event(res(1, content=["b"]), id="b1")), n=0)
    c.end(r)
    assert _answers(c) == [("f1", "0", "f1"), ("f2", "1", "f2"), ("f4", "1", "f3")]


def test_a_stray_answer_answers_the_latest_earlier_request_with_its_id() -> None:
    c = Capture()
    _initialized(c)
    g = c.request("GET", headers=S1)
    c.response(g, sse=True)
    first = c.request(body=req("ping", 2), headers=S1)
    c.response(first, 202)
    c.chunk(g, sse(event(res(2), id="g1")), n=0)  # answers `first`
    second = c.request(body=req("ping", 2), headers=S1)
    c.response(second, 202)
    c.chunk(g, sse(event(res(2), id="g2")), n=1)  # answers `second`, the latest before it
    c.chunk(g, sse(event(res(7), id="g3")), n=2)  # no request with id 7: none
    c.chunk(g, sse(event({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}})),
            n=3)  # fmt: skip
    c.end(g, "client_closed")
    assert _answers(c) == [
        ("f1", "0", "f1"),
        ("f2", "2", "f3"),
        ("f2", "2", "f4"),
        ("f2", "7", None),
        ("f2", "null", None),  # a null-id error answers no request
    ]


def test_an_answer_sent_before_any_request_with_its_id_answers_none() -> None:
    c = Capture()
    _initialized(c)
    g = c.request("GET", headers=S1)
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(3), id="g1")), n=0)
    late = c.request(body=req("ping", 3), headers=S1)
    c.response(late, body=res(3))
    assert _answers(c) == [("f1", "0", "f1"), ("f2", "3", None), ("f3", "3", "f3")]


def test_2026_answers_count_only_on_their_own_exchange() -> None:
    c = Capture()
    a = _call(c, 1, headers=V26)
    c.response(a, body=res(1, content=[]))
    b = _call(c, 2, headers=V26)
    c.response(b, sse=True)
    c.chunk(b, sse(event(res(1, content=[])), event(res(2, content=[]))), n=0)  # 1 is a's id
    c.end(b)
    assert _answers(c) == [("f1", "1", "f1"), ("f2", "1", None), ("f2", "2", "f2")]


def test_legacy_answers_on_the_sse_stream_answer_their_post() -> None:
    c = Capture()
    s = c.request("GET", "/sse")
    c.response(s, sse=True)
    c.chunk(s, sse(event("/messages/?session_id=L", event="endpoint")), n=0)
    for n, rid in enumerate((1, 1), start=1):  # a legacy client reusing an id
        p = c.request(path="/messages/?session_id=L", body=req("tools/call", rid, name="t"))
        c.response(p, 202)
        c.chunk(s, sse(event(res(rid, content=[]))), n=n)
    assert _answers(c) == [("f1", "1", "f2"), ("f1", "1", "f3")]
