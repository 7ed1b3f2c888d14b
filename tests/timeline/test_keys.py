"""analyzer.timeline.keys: session keys and eras per flow."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.timeline.keys import KEY_COLUMNS, ORIGIN, READ_COLUMNS, key_flows
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


_A, _B = "http://127.0.0.1:9001", "https://mcp.b.test:443"


def _sessioned(c: Capture, origin: str, session: str, at: float) -> None:
    """An initialize to `origin` that gets `session`, then a ping in it."""
    f = c.request(body=req("initialize", 1, protocolVersion="2025-06-18"), origin=origin, at=at)
    c.response(f, body=res(1, protocolVersion="2025-06-18"), headers={"Mcp-Session-Id": session})
    g = c.request(body=req("ping", 2), headers={"Mcp-Session-Id": session}, origin=origin)
    c.response(g, body=res(2))


def _sessions(capture: Capture) -> list[tuple[object, ...]]:
    frame = timeline_of(capture).sessions.collect()
    return rows(frame, "session_id", "origin", "server", "flows")


def test_equal_session_ids_of_two_origins_are_two_sessions_named_by_origin() -> None:
    c = Capture()
    _sessioned(c, _A, "1", at=10)
    _sessioned(c, _B, "1", at=20)
    assert [flow[1] for flow in _by_flow(c)] == [f"mcp:1@{_A}"] * 2 + [f"mcp:1@{_B}"] * 2
    assert _sessions(c) == [
        (f"mcp:1@{_A}", _A, f"{_A}/mcp", 2),
        (f"mcp:1@{_B}", _B, f"{_B}/mcp", 2),
    ]


def test_one_origin_keeps_the_plain_keys() -> None:
    c = Capture()
    _sessioned(c, _A, "1", at=10)
    _sessioned(c, _A, "2", at=20)
    plain = [("mcp:1", None, "127.0.0.1/mcp", 2), ("mcp:2", None, "127.0.0.1/mcp", 2)]
    assert _sessions(c) == plain


def test_runs_of_one_origin_each_merge_into_shared_sessions() -> None:
    """Replicas captured separately (a reverse proxy in front of each): one session."""
    c, d = Capture("run-1").open(), Capture("run-2").open()
    _sessioned(c, _A, "1", at=10)
    g = d.request(body=req("ping", 3), headers={"Mcp-Session-Id": "1"}, origin=_B, flow="g1", at=30)
    d.response(g, body=res(3))
    c.records += d.records
    assert [flow[1] for flow in _by_flow(c)] == ["mcp:1"] * 3


def test_a_sessionless_2025_flow_belongs_to_its_own_origins_initialize() -> None:
    c = Capture()
    a = c.request(body=req("initialize", 1, protocolVersion="2025-03-26"), origin=_A)
    c.response(a, body=res(1, protocolVersion="2025-03-26"))
    b = c.request(body=req("initialize", 1, protocolVersion="2025-03-26"), origin=_B)
    c.response(b, body=res(1, protocolVersion="2025-03-26"))
    p = c.request(body=req("ping", 2), origin=_A)  # after B's initialize, to A
    c.response(p, body=res(2))
    assert [flow[1] for flow in _by_flow(c)] == [
        f"anon:10.0.0.1:f1@{_A}",
        f"anon:10.0.0.1:f2@{_B}",
        f"anon:10.0.0.1:f1@{_A}",
    ]


@pytest.mark.parametrize(
    ("scheme", "authority", "upstream", "origin"),
    [
        ("http", "127.0.0.1:9001", None, "http://127.0.0.1:9001"),  # the proxy, since origins
        ("http", "127.0.0.1", "127.0.0.1:9001", "http://127.0.0.1:9001"),  # before: Host's host
        ("HTTPS", "MCP.example.com", "93.184.216.34", "https://mcp.example.com:443"),  # HAR
        ("http", "[::1]:8000", "[::1]:8000", "http://[::1]:8000"),
        ("http", "[::1]", "[::1]:8000", "http://[::1]:8000"),
        ("https", "::1", "::1", "https://::1:443"),  # a HAR's bare v6 address has no port
        ("http", None, None, None),
    ],
)
def test_origin_of_a_flow(
    scheme: str, authority: str | None, upstream: str | None, origin: str | None
) -> None:
    flow = pl.DataFrame(
        {"scheme": [scheme], "authority": [authority], "upstream": [upstream]},
        schema={"scheme": pl.String, "authority": pl.String, "upstream": pl.String},
    )
    assert flow.select(ORIGIN).item() == origin


def test_key_flows_reads_only_its_read_columns() -> None:
    """Selecting READ_COLUMNS first (as `build_timeline` does) keys the flows alike; a column
    `key_flows` reads that is not listed fails here as not found."""
    from analyzer.normalize import normalize_records

    c = Capture()
    _sessioned(c, _A, "1", at=10)
    _sessioned(c, _B, "1", at=20)
    a = c.request(body=req("initialize", 1, protocolVersion="2025-03-26"), origin=_A, at=30)
    c.response(a, body=res(1, protocolVersion="2025-03-26"))
    c.request(body=req("ping", 2), origin=_A)
    flows = normalize_records(c.records, client_header="x-client").flows.lazy()
    keyed = ["flow_id", *KEY_COLUMNS]
    whole = flows.pipe(key_flows).select(keyed).sort("flow_id").collect()
    narrow = flows.select(READ_COLUMNS).pipe(key_flows).select(keyed).sort("flow_id").collect()
    assert_frame_equal(narrow, whole)
    assert sorted(whole["session_kind"].cast(pl.String)) == ["anon"] * 2 + ["mcp"] * 4


@pytest.mark.parametrize(
    ("origins", "several", "keys"),
    [
        ((_A, _B), None, [f"mcp:1@{_A}", f"mcp:2@{_B}"]),  # judged over the flows given
        ((_A, _A), None, ["mcp:1", "mcp:2"]),
        # Told by the caller that judged every flow (a Spark bucket holds only some sessions):
        ((_A, _A), True, [f"mcp:1@{_A}", f"mcp:2@{_A}"]),
        ((_A, _B), False, ["mcp:1", "mcp:2"]),
    ],
)
def test_several_origins_told_or_judged(
    origins: tuple[str, str], several: bool | None, keys: list[str]
) -> None:
    from analyzer.normalize import normalize_records

    c = Capture()
    _sessioned(c, origins[0], "1", at=10)
    _sessioned(c, origins[1], "2", at=20)
    flows = normalize_records(c.records).flows.lazy()
    keyed = flows.pipe(key_flows, several).filter(pl.col("session_kind") == "mcp").collect()
    assert sorted(keyed["session_id"].unique()) == keys
