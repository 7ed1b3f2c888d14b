"""The timeline frames the OTLP export reads (analyzer/otlp/frames.py)."""

from __future__ import annotations

import dataclasses

import pytest

from analyzer.otlp.frames import error_codes, tool_results
from tests.support.records import Capture, event, req, res, sse, timeline_of


def answered_twice() -> tuple[Capture, str]:
    """A tools/call whose stream answers it twice: first "one", then an error, "two", an error."""
    c = Capture().open()
    init = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"))
    c.response(init, body=res(0, protocolVersion="2025-06-18"), headers={"Mcp-Session-Id": "s"})
    c.end(init)
    call = c.request(
        body=req("tools/call", 1, name="t", arguments={}), headers={"Mcp-Session-Id": "s"}
    )
    c.response(call, sse=True)
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "first"}}
    later = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32002, "message": "second"}}
    c.chunk(call, sse(event(res(1, content=[{"type": "text", "text": "one"}]), id="e1")), n=0)
    c.chunk(call, sse(event(error, id="e2")), n=1)
    c.chunk(call, sse(event(res(1, content=[{"type": "text", "text": "two"}]), id="e3")), n=2)
    c.chunk(call, sse(event(later, id="e4")), n=3)
    c.end(call)
    return c.close(), call


@pytest.mark.parametrize("reverse", [False, True], ids=["wire-order", "reversed-rows"])
def test_of_two_answers_the_export_names_the_first_delivered(reverse: bool) -> None:
    capture, call = answered_twice()
    timeline = timeline_of(capture)
    if reverse:  # the rows in another order, as a group of sessions may hold them
        timeline = dataclasses.replace(timeline, messages=timeline.messages.reverse())
    assert tool_results(timeline)[call] == '{"content":[{"text":"one","type":"text"}]}'
    assert error_codes(timeline)[call] == -32001
