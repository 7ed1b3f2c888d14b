"""analyzer.timeline.tool_calls: every tools/call, its fate, MRTR legs and annotations."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from analyzer.timeline.tool_calls import HEADER_PARAMS, header_params, previous_calls
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
V26 = {"MCP-Protocol-Version": "2026-07-28"}


def _call(
    c: Capture, rid: int, name: str = "rm", headers: dict[str, str] = S1, **params: Any
) -> str:
    return c.request(
        body=req("tools/call", rid, name=name, arguments={"p": 1}, **params), headers=headers
    )


def test_outcomes_and_deliveries() -> None:
    c = Capture()
    a = _call(c, 1)  # JSON answer
    c.response(a, body=res(1, content=[]))
    b = _call(c, 2)  # stream broken, result on the resume
    c.response(b, sse=True)
    c.chunk(b, sse(event(id="b1", data="")), n=0)
    c.end(b, "client_closed")
    g = c.request("GET", headers={**S1, "Last-Event-ID": "b1"})
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(2, content=[], isError=True), id="b2")), n=0)
    c.end(g)
    d = _call(c, 3)  # session gone
    c.response(d, 404)
    e = _call(c, 4)  # no HTTP response at all
    c.end(e, "error", error="reset")
    f = _call(c, 5)  # still open at capture end
    c.response(f, sse=True)
    h = _call(c, 6)  # error response on its own stream
    c.response(h, sse=True)
    c.chunk(h, sse(event({"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": "x"}})), n=0)
    c.end(h)
    timeline = timeline_of(c)
    assert rows(
        timeline.tool_calls, "request_id", "first_outcome", "result_delivered", "result_flow_id",
        "result_incarnation", "result_kind", "result_is_error",
    ) == [
        ("1", "delivered", True, "f1", None, "response", False),
        ("2", "broken", True, "f3", 1, "response", True),
        ("3", "404", False, None, None, None, None),
        ("4", "no_response", False, None, None, None, None),
        ("5", "open", False, None, None, None, None),
        ("6", "delivered", True, "f7", 0, "error", None),
    ]  # fmt: skip


def test_legacy_result_on_the_sse_stream_counts_as_delivered() -> None:
    c = Capture()
    s = c.request("GET", "/sse")
    c.response(s, sse=True)
    c.chunk(s, sse(event("/messages/?session_id=L", event="endpoint")), n=0)
    p = c.request(path="/messages/?session_id=L", body=req("tools/call", 1, name="t"))
    c.response(p, 202)
    c.chunk(s, sse(event(res(1, content=[]))), n=1)
    timeline = timeline_of(c)
    assert rows(timeline.tool_calls, "session_id", "first_outcome", "result_flow_id") == [
        ("legacy:L", "accepted", "f1")
    ]


def test_2026_results_count_only_on_their_own_exchange() -> None:
    meta = {"io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"}}
    c = Capture()
    a = _call(c, 1, headers=V26, _meta=meta)
    c.response(a, sse=True)
    c.end(a, "client_closed")  # the 2026 way to cancel
    b = _call(c, 1, headers=V26, _meta=meta)  # same id reused on a new exchange
    c.response(b, body=res(1, content=[]))
    timeline = timeline_of(c)
    assert rows(timeline.tool_calls, "flow_id", "result_delivered", "first_outcome") == [
        ("f1", False, "broken"),
        ("f2", True, "delivered"),
    ]


def test_a_reused_id_takes_the_first_result_that_answers_the_call() -> None:
    """A client that reuses an id in its session: each call takes the first result that answers
    it (`analyzer.timeline.answers`): one on its own stream, else a stray one (here on the GET
    stream) answers the latest call with the id before it."""
    c = Capture()
    a = _call(c, 1)
    c.response(a, body=res(1, content=[]))
    b = _call(c, 1)  # its stream breaks: never answered
    c.response(b, sse=True)
    c.end(b, "client_closed")
    g = c.request("GET", headers=S1)  # the next answer with id 1 comes on a GET stream
    c.response(g, sse=True)
    d = _call(c, 1)
    c.response(d, 202)
    c.chunk(g, sse(event(res(1, content=[]), id="g1")), n=0)
    c.chunk(g, sse(event(res(1, content=[], isError=True), id="g2")), n=1)
    c.end(g)
    timeline = timeline_of(c)
    assert rows(
        timeline.tool_calls, "flow_id", "first_outcome", "result_flow_id", "result_is_error"
    ) == [
        ("f1", "delivered", "f1", False),
        ("f2", "broken", None, None),  # g1 came after f4, the latest call with id 1
        ("f4", "accepted", "f3", False),  # g1, its first answer (g2 the second)
    ]


def test_mrtr_legs_by_params_or_by_an_input_required_predecessor() -> None:
    c = Capture()
    a = _call(c, 1)
    c.response(a, body=res(1, resultType="input_required", inputRequests={"q": {}}))
    b = _call(c, 2)  # retried without params: its predecessor asked for input
    c.response(b, body=res(2, content=[]))
    d = _call(c, 3, inputResponses={"q": {}}, requestState="s")
    c.response(d, body=res(3, content=[]))
    e = _call(c, 4)  # predecessor completed: not a leg
    c.response(e, body=res(4, content=[]))
    timeline = timeline_of(c)
    assert rows(timeline.tool_calls, "request_id", "mrtr", "input_required") == [
        ("1", False, True),
        ("2", True, False),
        ("3", True, False),
        ("4", False, False),
    ]


def test_annotations_in_force_at_the_call_else_from_the_latest_list_anywhere() -> None:
    c = Capture()
    old = c.request(body=req("tools/list", 1), headers=S1)
    c.response(old, body=res(1, tools=[{"name": "ro", "annotations": {"readOnlyHint": False}}]))
    for rid, name in enumerate(("ro", "plain", "idem", "ghost"), start=10):
        call = _call(c, rid, name=name)
        c.response(call, body=res(rid, content=[]))
    cancel = c.request(body=req("notifications/cancelled", requestId=13), headers=S1)
    c.response(cancel, 202)
    tools = [
        {"name": "ro", "annotations": {"readOnlyHint": True}},
        {"name": "plain"},
        {"name": "idem", "annotations": {"idempotentHint": True, "destructiveHint": False}},
    ]
    later = c.request(body=req("tools/list", 2), headers={"Mcp-Session-Id": "other"})
    c.response(later, body=res(2, tools=tools))
    timeline = timeline_of(c)
    assert rows(
        timeline.tool_calls, "tool_name", "tool_listed", "annotated", "read_only_hint",
        "destructive_hint", "idempotent_hint", "open_world_hint", "cancelled", "server",
    ) == [
        # listed before the call (not read-only), and read-only only in a later list
        ("ro", True, True, False, True, False, True, False, "mcp.test:9000/mcp"),
        ("plain", True, False, False, True, False, True, False, "mcp.test:9000/mcp"),
        ("idem", True, True, False, False, True, True, False, "mcp.test:9000/mcp"),
        ("ghost", False, None, None, None, None, None, True, "mcp.test:9000/mcp"),
    ]  # fmt: skip


def test_a_listing_is_the_server_of_the_request_it_answers() -> None:
    """Two servers list a tool of one name under an id that recurs in one 2026 client key (a
    CLI run against each): each listing is its own server's, so a call to /a keeps /a's hints."""
    meta = {"io.modelcontextprotocol/clientInfo": {"name": "cli", "version": "1"}}
    c = Capture()
    for path, hints in (("/a", {"readOnlyHint": True}), ("/b", {"readOnlyHint": False})):
        f = c.request(path=path, body=req("tools/list", 1, _meta=meta), headers=V26)
        c.response(f, body=res(1, tools=[{"name": "t", "annotations": hints}]))
    call = c.request(
        path="/a", body=req("tools/call", 2, name="t", arguments={}, _meta=meta), headers=V26
    )
    c.response(call, body=res(2, content=[]))
    timeline = timeline_of(c)
    assert rows(timeline.tool_calls, "server", "read_only_hint") == [("mcp.test:9000/a", True)]


def test_header_params_read_x_mcp_header_declarations_of_tools_list_results() -> None:
    listed = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "tools": [
                {
                    "name": "transfer",
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            "account": {"type": "string", "x-mcp-header": "Account"},
                            "to": {"properties": {"bank": {"x-mcp-header": "Bank"}}},
                        },
                    },
                },
                # a declaration on the schema root names no argument; a tool without a name
                {"name": "root", "inputSchema": {"x-mcp-header": "Root"}},
                {"inputSchema": {"properties": {"x": {"x-mcp-header": "X"}}}},
            ]
        },
    }
    texts = [json.dumps(listed), json.dumps(listed), "x-mcp-header but not JSON {", "[]"]
    payloads = pl.LazyFrame(
        {
            "data_hash": ["h1", "h1", "h2", "h3"],
            "base64": [False, False, False, False],
            "text": texts,
        }
    )
    got = header_params(payloads).sort("token")
    assert got.rows() == [
        ("transfer", "account", '$.params.arguments["account"]'),
        ("transfer", "bank", '$.params.arguments["to"]["bank"]'),
    ]
    assert header_params(payloads.clear()).schema == HEADER_PARAMS


def test_previous_calls_pair_each_repeat_with_the_call_before_it_with_its_key() -> None:
    c = Capture()
    for rid, name in ((1, "rm"), (2, "ls"), (3, "rm"), (4, "rm")):
        c.response(_call(c, rid, name), body=res(rid, content=[]))
    tl = timeline_of(c)
    got = previous_calls(tl.tool_calls, tl.sessions, tl.exchanges)
    # `ls`, sent once, cannot repeat; each `rm` names the one before it.
    assert rows(got, "request_id", "prev_request_id", "prev_flow_id") == [
        ("1", None, None),
        ("3", "1", "f1"),
        ("4", "3", "f3"),
    ]
