"""header-mismatch: 2026-07-28 Mcp-* request headers disagreeing with an accepted body."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.header_mismatch import DETECTOR
from tests.support.records import Capture, req, res, timeline_of

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
TOOLS = [
    {
        "name": "charge_card",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "amount": {"type": "integer", "x-mcp-header": "Amount"},
                "note": {"type": "string"},
            },
        },
    },
    {"name": "get_balance", "inputSchema": {"type": "object"}},
]


def b64(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def call(
    method: str, headers: dict[str, str], status: int = 200, listed: bool = True, **params: Any
) -> Callable[[Capture], None]:
    """One 2026 request with these Mcp-* headers (after a tools/list when `listed`)."""

    def build(c: Capture) -> None:
        base = {"MCP-Protocol-Version": VERSION}
        if listed:
            f = c.request(
                body=req("tools/list", 1, _meta=META), headers={**base, "Mcp-Method": "tools/list"}
            )
            c.response(f, body=res(1, tools=TOOLS))
        f = c.request(body=req(method, 2, **params, _meta=META), headers={**base, **headers})
        c.response(f, status, body=res(2, content=[]) if status == 200 else None)

    build.__name__ = "_".join([method.replace("/", "_"), *headers.values(), str(status)])
    return build


CHARGE = {"name": "charge_card", "arguments": {"region": "eu-west", "amount": 1250}}
ROUTE = {"Mcp-Method": "tools/call", "Mcp-Name": "charge_card"}

CASES: list[tuple[Callable[[Capture], None], list[tuple[str, str, list[str]]]]] = [
    (
        call("tools/call", {"Mcp-Method": "tools/call", "Mcp-Name": "get_balance"}, **CHARGE),
        [("medium", "mcp-name", ["2"])],
    ),
    (
        call("tools/call", {"Mcp-Method": "tools/list", "Mcp-Name": "charge_card"}, **CHARGE),
        [("medium", "mcp-method", ["2"])],
    ),
    (
        call("tools/call", {**ROUTE, "Mcp-Param-Region": "us-east"}, **CHARGE),
        [("medium", "mcp-param-region", ["2"])],
    ),
    (
        call("tools/call", {**ROUTE, "Mcp-Name": b64("get_balance")}, **CHARGE),
        [("medium", "mcp-name", ["2"])],
    ),
    (
        call(
            "resources/read",
            {"Mcp-Method": "resources/read", "Mcp-Name": "file:///b"},
            uri="file:///a",
        ),
        [("medium", "mcp-name", ["2"])],
    ),
    # near miss: the server refused the mismatch
    (call("tools/call", {**ROUTE, "Mcp-Param-Region": "us-east"}, status=400, **CHARGE), []),
    # clean: base64-sentinel values that decode equal, numbers, matching headers
    (call("tools/call", {**ROUTE, "Mcp-Param-Region": b64("eu-west")}, **CHARGE), []),
    (
        call(
            "tools/call",
            {"Mcp-Method": "tools/call", "Mcp-Name": b64(" zähler ✓")},
            name=" zähler ✓",
            arguments={},
        ),
        [],
    ),
    (
        call(
            "tools/call",
            {**ROUTE, "Mcp-Param-Amount": "1250", "Mcp-Param-Region": "eu-west"},
            **CHARGE,
        ),
        [],
    ),
    # not judged: a tool whose schema was not captured, a header whose body value is absent
    (call("tools/call", {**ROUTE, "Mcp-Param-Region": "us-east"}, listed=False, **CHARGE), []),
    (call("tools/call", {"Mcp-Method": "tools/call", "Mcp-Name": "x"}, requestState="s"), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(
    build: Callable[[Capture], None], expected: list[tuple[str, str, list[str]]]
) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["header-mismatch"])
    assert found["detector"].to_list() == ["header-mismatch"] * len(expected)
    got = [
        (r["severity"], r["title"].split()[0], r["request_ids"])
        for r in found.iter_rows(named=True)
    ]
    assert got == expected


def test_detail_shows_both_values() -> None:
    c = Capture()
    call("tools/call", {**ROUTE, "Mcp-Name": b64("get_balance")}, **CHARGE)(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["flow_ids"] == ["f2"]
    assert row["era"] == VERSION
    assert f"f2: header {b64('get_balance')} != body charge_card" in row["detail"]
    assert "400 (HEADER_MISMATCH)" in row["detail"]
