"""analyzer.timeline.sessions: one row per session key, with how it ended."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

from typing import Any

import polars as pl

from tests.support.records import Capture, ms, req, res, rows, timeline_of


def _ts(at: float) -> Any:
    return pl.Series([ms(at)]).cast(pl.Datetime("ns", "UTC")).item()


def test_sessions_end_by_delete_404_or_capture_end() -> None:
    c = Capture()
    for sid, client in (("A", "10.0.0.1:1"), ("B", "10.0.0.2:1"), ("C", "10.0.0.3:1")):
        f = c.request(
            body=req("initialize", 1, protocolVersion="2025-11-25", clientInfo={"name": sid}),
            client=client,
        )
        c.response(f, body=res(1, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": sid})
    d = c.request("DELETE", headers={"Mcp-Session-Id": "A"}, at=10)
    c.response(d, 200, at=11)
    gone = c.request(body=req("ping", 2), headers={"Mcp-Session-Id": "B"}, at=12)
    c.response(gone, 404, at=13)
    refused = c.request("DELETE", headers={"Mcp-Session-Id": "C"}, at=14)
    c.response(refused, 405, at=15)
    timeline = timeline_of(c)
    assert rows(
        timeline.sessions, "session_id", "kind", "era", "client_ip", "client_info",
        "end_how", "end_ts", "end_flow_id", "initialized", "init_flow_id", "flows", "streams",
    ) == [
        ("mcp:A", "mcp", "2025-11-25", "10.0.0.1", "A", "delete", _ts(11), "f4", True, "f1", 2, 0),
        ("mcp:B", "mcp", "2025-11-25", "10.0.0.2", "B", "404", _ts(13), "f5", True, "f2", 2, 0),
        ("mcp:C", "mcp", "2025-11-25", "10.0.0.3", "C", "capture_end", _ts(15), None, True, "f3", 2, 0),
    ]  # fmt: skip
    assert rows(timeline.sessions, "start", "last_ts")[0] == (_ts(1), _ts(11))
