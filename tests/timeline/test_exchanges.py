"""analyzer.timeline.exchanges: flows, SSE events and messages placed in sessions and streams."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

from tests.support.records import Capture, event, req, res, rows, sse, timeline_of


def test_exchange_rows_carry_session_stream_and_request_facts() -> None:
    c = Capture()
    p = c.request(body=req("tools/call", 3, name="t"), headers={"Mcp-Session-Id": "S"})
    c.response(p, sse=True)
    c.chunk(p, sse(event(res(3), id="x")), n=0)
    c.end(p, "server_closed")
    j = c.request(body=[req("ping", 4), req("ping", 5)], headers={"Mcp-Session-Id": "S"})
    c.response(j, body=[res(4), res(5)])
    timeline = timeline_of(c)
    assert rows(
        timeline.exchanges, "flow_id", "session_id", "stream_id", "incarnation", "sse",
        "rpc_kind", "rpc_id", "rpc_method", "end_how", "events", "last_cursor",
    ) == [
        ("f1", "mcp:S", "f1", 0, True, "request", "3", "tools/call", "server_closed", 1, "x"),
        ("f2", "mcp:S", None, None, False, "batch", "4", "ping", None, 0, None),
    ]  # fmt: skip
    messages = timeline.messages.collect().sort("seq", "member")
    assert rows(messages, "flow_id", "source", "member", "direction", "kind", "rpc_id", "stream_id") == [
        ("f1", "request_body", None, "c2s", "request", "3", "f1"),
        ("f1", "sse", None, "s2c", "response", "3", "f1"),
        ("f2", "request_body", 0, "c2s", "request", "4", None),
        ("f2", "request_body", 1, "c2s", "request", "5", None),
        ("f2", "response_body", 0, "s2c", "response", "4", None),
        ("f2", "response_body", 1, "s2c", "response", "5", None),
    ]  # fmt: skip
