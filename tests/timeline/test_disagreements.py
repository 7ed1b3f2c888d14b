"""Accepted 2026 requests whose Mcp-* headers disagree with their body (analyzer/timeline/
disagreements.py; the finding is judged in tests/detectors/test_header_mismatch.py)."""

from __future__ import annotations

import base64
from typing import Any

from analyzer.timeline import disagreements
from tests.support.records import Capture, req, res, rows, timeline_of

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
AMOUNT = {"type": "integer", "x-mcp-header": "Amount"}
TOOLS = [{"name": "charge", "inputSchema": {"type": "object", "properties": {"amount": AMOUNT}}}]


def sent(c: Capture, rid: int, headers: dict[str, str], status: int = 200, **params: Any) -> str:
    base = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call"}
    f = c.request(body=req("tools/call", rid, **params, _meta=META), headers={**base, **headers})
    c.response(f, status, body=res(rid, content=[]) if status == 200 else None)
    return f


def listed(c: Capture) -> None:
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"}
    f = c.request(body=req("tools/list", 1, _meta=META), headers=headers)
    c.response(f, body=res(1, tools=TOOLS))


def test_each_header_name_gathers_its_accepted_disagreements() -> None:
    c = Capture()
    listed(c)
    args = {"name": "charge", "arguments": {"amount": 1250}}
    wrong_name = sent(c, 2, {"Mcp-Name": "refund"}, **args)
    sent(c, 3, {"Mcp-Name": "charge", "Mcp-Param-Amount": "1250.0"}, **args)  # equal as numbers
    encoded = base64.b64encode(b"charge").decode()
    sent(c, 4, {"Mcp-Name": f"=?base64?{encoded}?="}, **args)  # equal once decoded
    wrong_amount = sent(c, 5, {"Mcp-Param-Amount": "9"}, **args)
    sent(c, 6, {"Mcp-Name": "refund"}, 400, **args)  # refused
    got = disagreements.accepted(timeline_of(c))
    assert got is not None
    assert sorted(rows(got, "name", "flow_ids", "request_ids")) == [
        ("mcp-name", [wrong_name], ["2"]),
        ("mcp-param-amount", [wrong_amount], ["5"]),
    ]


def test_no_mcp_header_means_nothing_to_judge() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 2, name="charge", arguments={}, _meta=META))
    c.response(f, body=res(2, content=[]))
    assert disagreements.accepted(timeline_of(c)) is None
