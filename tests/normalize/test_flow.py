"""analyzer.normalize.flow: a flow's row, collected from its request, response and end."""

from __future__ import annotations

from analyzer.normalize import normalize_records
from tests.support.records import Capture, event, req, sse

H = {"mcp-session-id": "S1"}


def test_flow_row_collects_request_response_and_end() -> None:
    c = Capture()
    f = c.request(
        path="/mcp?x=1",
        body=req("tools/call", 7, name="t", arguments={}),
        headers={**H, "MCP-Protocol-Version": "2025-11-25", "Last-Event-ID": "e9"},
    )
    c.response(f, sse=True, headers={"Content-Type": "text/event-stream; charset=utf-8"})
    c.chunk(f, sse(event(id="a", data=""), "retry: 500\n" + event({"x": 1}, id="b")), n=0)
    c.chunk(f, "data: torn", n=1)
    c.end(f, "server_closed", error="reset")
    row = normalize_records(c.records).flows.row(0, named=True)
    assert (row["path"], row["query"], row["method"]) == ("/mcp", "x=1", "POST")
    assert (row["last_event_id"], row["mcp_session_id"], row["protocol_version"]) == (
        "e9",
        "S1",
        "2025-11-25",
    )
    assert (row["rpc_kind"], row["rpc_id"], row["rpc_method"]) == ("request", "7", "tools/call")
    assert (row["status"], row["content_type"], row["streamed"]) == (200, "text/event-stream", True)
    assert (row["events"], row["payload_events"], row["chunks"]) == (2, 1, 2)
    assert (row["first_cursor"], row["last_cursor"], row["last_retry_ms"]) == ("a", "b", 500)
    assert (row["end_how"], row["end_error"], row["tail_bytes"]) == ("server_closed", "reset", 10)
    assert row["client_ip"] == "10.0.0.1"
