"""analyzer.timeline.keys: session keys and eras per flow."""

from __future__ import annotations

from tests.support.records import Capture, event, req, res, rows, sse, timeline_of


def _by_flow(capture: Capture) -> list[tuple[object, ...]]:
    frame = timeline_of(capture, client_header="x-client").exchanges.collect().sort("seq")
    return rows(frame, "flow_id", "session_id", "era")


def test_mcp_session_from_the_initialize_response_applies_to_that_exchange() -> None:
    c = Capture()
    f = c.request(body=req("initialize", 1, protocolVersion="2025-06-18"))
    c.response(f, body=res(1, protocolVersion="2025-06-18"), headers={"Mcp-Session-Id": "A"})
    g = c.request(body=req("ping", 2), headers={"Mcp-Session-Id": "A"})
    c.response(g, body=res(2))
    h = c.request("GET", headers={"Mcp-Session-Id": "A", "MCP-Protocol-Version": "2025-06-18"})
    c.response(h, 405)
    assert _by_flow(c) == [
        ("f1", "mcp:A", "2025-06-18"),  # from its initialize result
        ("f2", "mcp:A", "2025-06-18"),  # from its session
        ("f3", "mcp:A", "2025-06-18"),  # from its header
    ]


def test_legacy_session_from_the_endpoint_event_and_the_post_query() -> None:
    c = Capture()
    g = c.request("GET", "/sse")
    c.response(g, sse=True)
    c.chunk(g, sse(event("/messages/?session_id=abc", event="endpoint")), n=0)
    p = c.request(path="/messages/?session_id=abc", body=req("initialize", 1))
    c.response(p, 202)
    q = c.request(path="/message?sessionId=xyz", body=req("ping", 2))  # TypeScript SDK spelling
    c.response(q, 202)
    assert _by_flow(c) == [
        ("f1", "legacy:abc", "2024-11-05"),
        ("f2", "legacy:abc", "2024-11-05"),
        ("f3", "legacy:xyz", "2024-11-05"),
    ]


def test_anon_session_is_the_latest_initialize_of_the_same_address() -> None:
    c = Capture()
    a = c.request(body=req("initialize", 1, protocolVersion="2025-03-26"), client="10.0.0.1:1")
    c.response(a, body=res(1, protocolVersion="2025-03-26"))
    b = c.request(body=req("tools/list", 2), client="10.0.0.1:2")
    c.response(b, body=res(2, tools=[]))
    other = c.request(body=req("tools/list", 2), client="10.0.0.2:1")
    c.response(other, body=res(2, tools=[]))
    again = c.request(body=req("initialize", 1), client="10.0.0.1:3")
    c.response(again, body=res(1, protocolVersion="2025-03-26"))
    d = c.request(body=req("ping", 3), client="10.0.0.1:4")
    c.response(d, body=res(3))
    assert _by_flow(c) == [
        ("f1", "anon:10.0.0.1:f1", "2025-03-26"),
        ("f2", "anon:10.0.0.1:f1", "2025-03-26"),
        ("f3", "anon:10.0.0.2:-", "unknown"),
        ("f4", "anon:10.0.0.1:f4", "2025-03-26"),
        ("f5", "anon:10.0.0.1:f4", "2025-03-26"),
    ]


def test_2026_client_key_from_meta_client_info_and_client_header() -> None:
    meta = {
        "io.modelcontextprotocol/clientInfo": {"name": "app", "version": "3"},
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    }
    h = {"MCP-Protocol-Version": "2026-07-28", "X-Client": "tenant-7"}
    c = Capture()
    f = c.request(body=req("server/discover", 1, _meta=meta), headers=h)
    c.response(f, body=res(1, supportedVersions=["2026-07-28"]))
    g = c.request(body=req("notifications/cancelled", requestId=1), headers=h)  # no _meta
    c.response(g, 202)
    k = c.request(body=req("tools/list", 2, _meta=meta))  # version only in _meta
    c.response(k, body=res(2, tools=[]))
    key = "client:10.0.0.1|app/3|tenant-7"
    assert _by_flow(c) == [
        ("f1", key, "2026-07-28"),
        ("f2", key, "2026-07-28"),
        ("f3", "client:10.0.0.1|app/3|", "2026-07-28"),
    ]
