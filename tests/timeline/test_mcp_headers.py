"""The 2026-07-28 Mcp-* headers beside their body (analyzer/timeline/mcp_headers.py; what is
flagged is judged in tests/detectors/test_header_mismatch.py)."""

from __future__ import annotations

import base64
from typing import Any

import polars as pl

from analyzer.timeline.mcp_headers import DECODED, declared_argument, header_rows, headers_sent
from tests.support.records import Capture, req, res, timeline_of

V26 = {"MCP-Protocol-Version": "2026-07-28"}
TOOLS = [
    {
        "name": "charge_card",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    }
]
CHARGE = {"name": "charge_card", "arguments": {"region": "eu-west"}}


def capture(headers: dict[str, str], *, listed: bool = True) -> Any:
    c = Capture()
    if listed:
        f = c.request(body=req("tools/list", 1), headers={**V26, "Mcp-Method": "tools/list"})
        c.response(f, body=res(1, tools=TOOLS))
    f = c.request(body=req("tools/call", 2, **CHARGE), headers={**V26, **headers})
    c.response(f, body=res(2, content=[]))
    return timeline_of(c)


def accepted(tl: Any) -> pl.LazyFrame:
    frame: pl.LazyFrame = tl.exchanges.filter(pl.col("mcp_headers").list.len() > 0)
    return frame


def test_headers_sent_says_whether_any_and_any_param_header_was_sent() -> None:
    assert headers_sent(accepted(capture({}, listed=False))) == (False, False)
    assert headers_sent(accepted(capture({"Mcp-Method": "tools/call"}))) == (True, False)
    assert headers_sent(accepted(capture({"Mcp-Param-Region": "x"}))) == (True, True)


def test_header_rows_put_each_header_beside_its_body_values() -> None:
    tl = capture({"Mcp-Name": "charge_card", "Mcp-Param-Region": "eu-west"}, listed=False)
    got = header_rows(tl, accepted(tl)).sort("name").collect()
    assert got.select("name", "value", "_method", "_tool", "_token").rows() == [
        ("mcp-name", "charge_card", "tools/call", "charge_card", "mcp-name"),
        ("mcp-param-region", "eu-west", "tools/call", "charge_card", "region"),
    ]


def test_declared_argument_reads_the_argument_a_tools_list_declares() -> None:
    tl = capture({"Mcp-Param-Region": "us"})
    rows = header_rows(tl, accepted(tl)).filter(pl.col("name") == "mcp-param-region")
    wanted = rows.select(declared_argument(tl, wanted=True)).collect()
    assert wanted.to_series().to_list() == ["eu-west"]
    unwanted = rows.select(declared_argument(tl, wanted=False)).collect()
    assert unwanted.to_series().to_list() == [None]


def test_decoded_undoes_the_base64_sentinel() -> None:
    wrapped = f"=?base64?{base64.b64encode(b'eu-west').decode()}?="
    values = pl.DataFrame({"value": [wrapped, "plain", "=?base64?!!?="]})
    assert values.select(DECODED).to_series().to_list() == ["eu-west", "plain", None]
