"""analyzer.timeline.resumptions: each Last-Event-ID, where it was issued, what followed."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from analyzer import schema as S
from tests.support.records import Capture, event, req, res, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}


def test_resolution_counts_and_answers() -> None:
    c = Capture()
    p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=S1)
    c.response(p, sse=True, replica="r1")
    # priming, 3 progress events; the client only saw up to e1 when it broke
    c.chunk(
        p,
        sse(event(id="e0", data=""), *(event({"p": k}, id=f"e{k}") for k in (1, 2, 3))),
        n=0,
    )
    c.end(p, "client_closed")
    r1 = c.request("GET", headers={**S1, "Last-Event-ID": "e1"})  # resolved, answered on r2
    c.response(r1, sse=True, replica="r2")
    c.chunk(
        r1, sse(event({"p": 2}, id="e2"), event({"p": 3}, id="e3"), event(res(1), id="e4")), n=0
    )
    c.end(r1)
    r2 = c.request("GET", headers={**S1, "Last-Event-ID": "e0"})  # priming cursor, answered 404
    c.response(r2, 404, replica="r1")
    r3 = c.request(body=req("initialize", 9), headers={"Last-Event-ID": "e2"})  # initialize
    c.response(r3, body=res(9), headers={"Mcp-Session-Id": "S2"})
    r4 = c.request("GET", headers={**S1, "Last-Event-ID": "nope"})  # never issued
    c.response(r4, sse=True, replica="r1")
    got = (
        timeline_of(c)
        .resumptions.select(
            "flow_id", "cursor", "status", "stream_id", "with_initialize", "cursor_session_id",
            "cursor_incarnation", "cursor_priming", "events_after", "payload_events_after",
            "response_owed", "answer_status", "answer_stream_id", "answer_incarnation",
            "replica_changed",
        )
        .collect()
    )  # fmt: skip
    expected = pl.DataFrame(
        [
            ("f2", "e1", "resolved", "f1", False, "mcp:S1", 0, False, 2, 2, True, 200, "f1", 1, True),
            ("f3", "e0", "resolved", "f1", False, "mcp:S1", 0, True, 6, 6, False, 404, None, None, False),
            ("f5", "nope", "unresolved", None, False, None, None, None, None, None, False, 200, "f5", 0, None),
            ("f4", "e2", "other_session", None, True, "mcp:S1", 1, False, 2, 2, False, 200, None, None, True),
        ],
        schema={k: S.RESUMPTIONS[k] for k in got.columns},
        orient="row",
    )  # fmt: skip
    assert_frame_equal(got, expected)
