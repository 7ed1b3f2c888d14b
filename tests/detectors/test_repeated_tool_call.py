"""repeated-tool-call: the same side-effecting call re-issued, high when the first was lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.repeated_tool_call import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

V26 = "2026-07-28"
TOOLS = [
    {"name": "charge"},  # listed without annotations: side-effecting
    {"name": "balance", "annotations": {"readOnlyHint": True}},
    {"name": "upsert", "annotations": {"idempotentHint": True, "destructiveHint": False}},
]
CARD = {"card": "4242", "amount": 1999}


def _headers(sid: str | None) -> dict[str, str]:
    if sid is None:
        return {"MCP-Protocol-Version": V26}
    return {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}


def _meta(sid: str | None, info: str) -> dict[str, Any]:
    if sid is not None:
        return {}
    return {"_meta": {"io.modelcontextprotocol/clientInfo": {"name": info, "version": "1"}}}


def _init(c: Capture, sid: str, *, info: str = "app", client: str | None = None) -> None:
    """initialize answered with `Mcp-Session-Id: sid`, then tools/list (side-effecting tools)."""
    f = c.request(
        body=req("initialize", 0, protocolVersion="2025-11-25", clientInfo={"name": info}),
        client=client,
    )
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": sid})
    _list(c, sid)


def _list(c: Capture, sid: str | None, *, info: str = "app", tools: Any = TOOLS) -> None:
    f = c.request(body=req("tools/list", "list", **_meta(sid, info)), headers=_headers(sid))
    c.response(f, body=res("list", tools=tools))


def _call(
    c: Capture,
    sid: str | None,
    rid: int | str,
    *,
    fate: str = "json",
    name: str = "charge",
    arguments: Any = CARD,
    ids: tuple[str, ...] = (),
    info: str = "app",
    client: str | None = None,
    at: float | None = None,
    **params: Any,
) -> str:
    """A tools/call; `fate`: json, sse (result on its stream), broken, 404, none, input."""
    body = req("tools/call", rid, name=name, arguments=arguments, **params, **_meta(sid, info))
    f = c.request(body=body, headers=_headers(sid), client=client, at=at)
    result = res(rid, content=[{"type": "text", "text": "ok"}])
    if fate == "json":
        c.response(f, body=result)
    elif fate == "input":
        c.response(f, body=res(rid, resultType="input_required", inputRequests={"ok": {}}))
    elif fate == "404":
        c.response(f, 404)
    elif fate == "none":
        c.end(f, "error", error="connection reset")
    else:
        c.response(f, sse=True)
        progress = req("notifications/progress", progressToken=rid, progress=1)
        c.chunk(f, sse(event(id=ids[0], data=""), event(progress, id=ids[1])), n=0)
        if fate == "sse":
            c.chunk(f, sse(event(result, id=ids[2])), n=1)
            c.end(f)
        else:
            c.end(f, "client_closed")
    return f


def _resume(c: Capture, sid: str, cursor: str, rid: int, ids: tuple[str, ...]) -> None:
    """A correct replay on a GET incarnation: the result, then a new priming event."""
    g = c.request("GET", headers={**_headers(sid), "Last-Event-ID": cursor})
    c.response(g, sse=True)
    result = res(rid, content=[{"type": "text", "text": "ok"}])
    c.chunk(g, sse(event(result, id=ids[0]), event(id=ids[1], data="")), n=0)
    c.end(g)


# --- the cases: each builds a capture, expects (severity, request ids, session) rows ----------


def broken_then_reissued_key_order_and_space(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("1", "2"))
    raw = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":\n{ "amount": 1999, "card": "4242" },"name":"charge"}}'  # noqa: E501
    f = c.request(body=raw, headers=_headers("S1"))
    c.response(f, body=res(2, content=[]))


def modern_new_id_after_broken_stream(c: Capture) -> None:
    _list(c, None)
    ids = ("a4113d60-d8d5-4112-83a9-38043f049570_1750000000123_x7Kq",) * 2
    _call(c, None, 3, fate="broken", ids=(ids[0], ids[1] + "2"))
    _call(c, None, 4)


def same_id_in_next_session_after_404(c: Capture) -> None:
    _init(c, "3f2b9c4e-1d7a-4e8b-9c0d-5a6b7c8d9e0f")
    _call(c, "3f2b9c4e-1d7a-4e8b-9c0d-5a6b7c8d9e0f", 7, fate="404")
    _init(c, "b8e1d2c3-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
    _call(c, "b8e1d2c3-4f5a-4b6c-8d7e-9f0a1b2c3d4e", 7)


def no_http_response_then_reissued(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", "a", fate="none")
    _call(c, "S1", "b", fate="sse", ids=("e1", "e2", "e3"))


def _legacy(c: Capture, *, answered: bool) -> None:
    """2024-11-05 HTTP+SSE: POSTs answered 202, results due on the GET /sse stream."""
    s = c.request("GET", "/sse")
    c.response(s, sse=True)
    c.chunk(s, sse(event("/messages/?session_id=L", event="endpoint")), n=0)
    post = "/messages/?session_id=L"
    listing = c.request(path=post, body=req("tools/list", 1))
    c.response(listing, 202)
    c.chunk(s, sse(event(res(1, tools=TOOLS))), n=1)
    first = c.request(path=post, body=req("tools/call", 2, name="charge", arguments=CARD))
    c.response(first, 202)
    if answered:
        c.chunk(s, sse(event(res(2, content=[]))), n=2)
    again = c.request(path=post, body=req("tools/call", 3, name="charge", arguments=CARD))
    c.response(again, 202)
    c.chunk(s, sse(event(res(3, content=[]))), n=3)


def legacy_result_never_came(c: Capture) -> None:
    _legacy(c, answered=False)


def legacy_result_came(c: Capture) -> None:
    _legacy(c, answered=True)


def delivered_then_repeated(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="sse", ids=("e1", "e2", "e3"))
    _call(c, "S1", 2)


def result_arrived_on_resume_before_repeat(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("e1", "e2"))
    _resume(c, "S1", "e2", 1, ids=("e3", "e4"))
    _call(c, "S1", 2)


def unlisted_tool_after_loss(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, name="ghost", fate="broken", ids=("17", "18"))
    _call(c, "S1", 2, name="ghost")


def unlisted_tool_delivered_then_repeated(c: Capture) -> None:
    # No captured tools/list names it: a deliberate re-run looks the same (DESIGN.md §5).
    _init(c, "S1")
    _call(c, "S1", 1, name="ghost")
    _call(c, "S1", 2, name="ghost")


def idempotent_tool_is_low(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, name="upsert", fate="broken", ids=("e1", "e2"))
    _call(c, "S1", 2, name="upsert")


def three_attempts_give_two_repeats(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="404")
    _call(c, "S1", 2, fate="none")
    _call(c, "S1", 3)


def other_calls_in_between(c: Capture) -> None:
    # The repeat is judged against the last call of its own key, not the last call overall.
    _init(c, "S1")
    _call(c, "S1", 1, fate="404")
    _call(c, "S1", 2, arguments={**CARD, "amount": 2000})
    _call(c, "S1", 3, name="upsert")
    _call(c, "S1", 4)


CASES: dict[str, tuple[Callable[[Capture], None], list[tuple[str, list[str], str]]]] = {
    "broken, re-issued with keys reordered": (
        broken_then_reissued_key_order_and_space,
        [("high", ["1", "2"], "mcp:S1")],
    ),
    "2026 new id after a broken stream": (
        modern_new_id_after_broken_stream,
        [("high", ["3", "4"], "client:10.0.0.1|app/1|")],
    ),
    "404, same id in the next session": (
        same_id_in_next_session_after_404,
        [("high", ["7"], "mcp:b8e1d2c3-4f5a-4b6c-8d7e-9f0a1b2c3d4e")],
    ),
    "no HTTP response, re-issued": (
        no_http_response_then_reissued,
        [("high", ['"a"', '"b"'], "mcp:S1")],
    ),
    "legacy 202, result never came": (legacy_result_never_came, [("high", ["2", "3"], "legacy:L")]),
    "legacy 202, result came": (legacy_result_came, [("medium", ["2", "3"], "legacy:L")]),
    "delivered, then repeated": (delivered_then_repeated, [("medium", ["1", "2"], "mcp:S1")]),
    "result replayed before the repeat": (
        result_arrived_on_resume_before_repeat,
        [("medium", ["1", "2"], "mcp:S1")],
    ),
    "unlisted tool, after loss": (unlisted_tool_after_loss, [("high", ["1", "2"], "mcp:S1")]),
    "unlisted tool, delivered": (
        unlisted_tool_delivered_then_repeated,
        [("low", ["1", "2"], "mcp:S1")],
    ),
    "idempotent tool": (idempotent_tool_is_low, [("low", ["1", "2"], "mcp:S1")]),
    "three attempts": (
        three_attempts_give_two_repeats,
        [("high", ["1", "2"], "mcp:S1"), ("high", ["2", "3"], "mcp:S1")],
    ),
    "other calls in between": (other_calls_in_between, [("high", ["1", "4"], "mcp:S1")]),
}


# --- near misses and clean traffic: no finding ------------------------------------------------


def read_only_retry(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, name="balance", arguments={}, fate="broken", ids=("e1", "e2"))
    _call(c, "S1", 2, name="balance", arguments={})


def mrtr_legs_2026(c: Capture) -> None:
    _list(c, None)
    _call(c, None, 1, fate="input")  # asks for input: the next call is a leg
    _call(c, None, 2)
    _call(c, None, 3, fate="input", arguments={"card": "1111"})
    _call(c, None, 4, arguments={"card": "1111"}, inputResponses={"ok": {}}, requestState="s1")


def mrtr_leg_by_its_params_alone(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("e1", "e2"))  # its InputRequiredResult never came
    _call(c, "S1", 2, requestState="s1", inputResponses={"ok": {}})


def input_required_in_the_previous_session(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="input")
    _init(c, "S2")
    _call(c, "S2", 2)


def different_arguments(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("e1", "e2"))
    _call(c, "S1", 2, arguments={**CARD, "amount": 2000})


def different_tool(c: Capture) -> None:
    _init(c, "S1")
    _list(c, "S1", tools=[*TOOLS, {"name": "refund"}])
    _call(c, "S1", 1, fate="broken", ids=("e1", "e2"))
    _call(c, "S1", 2, name="refund")


def outside_the_window(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("e1", "e2"), at=100)
    _call(c, "S1", 2, at=100 + 121_000)


def another_client_in_the_next_session(c: Capture) -> None:
    _init(c, "S1", info="app")
    _call(c, "S1", 1, fate="404")
    _init(c, "S2", info="other-app")
    _call(c, "S2", 1)


def two_sessions_later(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="404")
    _init(c, "S2")
    _init(c, "S3")
    _call(c, "S3", 1)


def one_call_replayed_correctly(c: Capture) -> None:
    _init(c, "S1")
    _call(c, "S1", 1, fate="broken", ids=("NjQ0Mg==", "NjQ0Mw=="))
    _resume(c, "S1", "NjQ0Mw==", 1, ids=("NjQ0NA==", "NjQ0NQ=="))
    _call(c, "S1", 2, arguments={"card": "4242", "amount": 1})


def read_only_repeat_then_annotations_change(c: Capture) -> None:
    """A read-only repeat; later the server lists the tool as destructive (list_changed), and
    the tool is not called again: the calls were made while it was read-only."""
    _init(c, "S1")
    _call(c, "S1", 1, name="balance", arguments={})
    _call(c, "S1", 2, name="balance", arguments={})
    _list(c, "S1", tools=[{"name": "balance", "annotations": {"destructiveHint": True}}])


def same_call_to_two_origins(c: Capture) -> None:
    """A forward proxy's capture: the client's call got a 404 from one server, and the same call
    went to another server whose session has the same id (a call of its own, not a retry)."""
    for origin, fate in (("http://127.0.0.1:9001", 404), ("http://127.0.0.1:9002", 200)):
        f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"), origin=origin)
        c.response(f, body=res(0, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": "1"})
        g = c.request(body=req("tools/list", "list"), headers=_headers("1"), origin=origin)
        c.response(g, body=res("list", tools=TOOLS))
        call = req("tools/call", 7, name="charge", arguments=CARD)
        h = c.request(body=call, headers=_headers("1"), origin=origin)
        c.response(h, fate, body=res(7, content=[]) if fate == 200 else None)


CLEAN: dict[str, Callable[[Capture], None]] = {
    "read-only tool retried": read_only_retry,
    "MRTR legs": mrtr_legs_2026,
    "MRTR leg by its params": mrtr_leg_by_its_params_alone,
    "predecessor asked for input": input_required_in_the_previous_session,
    "different arguments": different_arguments,
    "different tool": different_tool,
    "repeat outside window_s": outside_the_window,
    "another client's next session": another_client_in_the_next_session,
    "two sessions later": two_sessions_later,
    "the same call to another origin": same_call_to_two_origins,
    "a broken call resumed, not re-issued": one_call_replayed_correctly,
    "read-only when called, side-effecting later": read_only_repeat_then_annotations_change,
}


def _findings(build: Callable[[Capture], None], **thresholds: Any) -> list[dict[str, Any]]:
    """The detector's findings through the runner (evidence conformed, fingerprints added)."""
    c = Capture().open()
    build(c)
    config = {DETECTOR.id: thresholds} if thresholds else None
    found = run_detectors(timeline_of(c), only=[DETECTOR.id], config=config)
    rows: list[dict[str, Any]] = found.filter(found["detector"] == DETECTOR.id).to_dicts()
    return sorted(rows, key=lambda row: (row["first_ts"], row["last_ts"]))


@pytest.mark.parametrize("name", list(CASES))
def test_flags_repeated_side_effecting_calls(name: str) -> None:
    build, expected = CASES[name]
    found = _findings(build)
    assert [(row["severity"], row["request_ids"], row["session"]) for row in found] == expected


@pytest.mark.parametrize("name", list(CLEAN))
def test_does_not_flag(name: str) -> None:
    assert _findings(CLEAN[name]) == []


def test_evidence_and_detail_name_both_calls_and_what_to_change() -> None:
    (row,) = _findings(broken_then_reissued_key_order_and_space)
    assert row["flow_ids"] == ["f3", "f4"]
    assert row["stream_ids"] == ["f3"]  # the second call was answered with JSON
    assert row["request_ids"] == ["1", "2"]
    assert row["first_ts"] < row["last_ts"]
    assert "charge" in row["title"] and "may have run twice" in row["title"]
    for words in ("request 1", "request 2", "same session", "'broken'", "idempotency key"):
        assert words in row["detail"]


def test_window_is_a_threshold() -> None:
    assert len(_findings(delivered_then_repeated)) == 1
    assert _findings(delivered_then_repeated, window_s=0.0005) == []


def test_fingerprint_ignores_flows_and_times() -> None:
    def fingerprints(shift: float) -> list[str]:
        def build(c: Capture) -> None:
            _init(c, "S1")
            _call(c, "S1", 1, fate="404", at=10 + shift)
            _call(c, "S1", 2, at=20 + shift)

        return [row["fingerprint"] for row in _findings(build)]

    assert fingerprints(0) == fingerprints(5000) != []


def test_an_idempotent_tool_repeated_many_times_is_one_low_finding() -> None:
    def polling(c: Capture) -> None:
        _init(c, "S1")
        for rid in range(1, 6):
            _call(c, "S1", rid, name="upsert")
        _call(c, "S1", 6, name="upsert", arguments={"other": 1})  # other arguments: no repeat
        _call(c, "S1", 7, name="charge")  # side-effecting: its own finding
        _call(c, "S1", 8, name="charge")

    found = _findings(polling)
    assert [(row["severity"], row["request_ids"]) for row in found] == [
        ("low", ["1", "2", "3", "4", "5"]),
        ("medium", ["7", "8"]),
    ]
    low = found[0]
    assert (
        low["title"] == "tools/call upsert repeated with the same arguments (5 calls, idempotent)"
    )
    assert "requests 1, 2, 3, 4, 5" in low["detail"] and "listed as idempotent" in low["detail"]
    assert low["flow_ids"] == ["f3", "f4", "f5", "f6", "f7"]


def test_a_run_counts_calls_even_when_they_reuse_one_id() -> None:
    def same_id(c: Capture) -> None:
        _init(c, "S1")
        for _ in range(3):
            _call(c, "S1", 9, name="upsert")

    (row,) = _findings(same_id)
    assert row["request_ids"] == ["9"]
    assert "(3 calls, idempotent)" in row["title"] and "sent 3 times" in row["detail"]


def test_what_to_change_follows_whether_the_first_call_was_lost() -> None:
    (lost,) = _findings(broken_then_reissued_key_order_and_space)
    (kept,) = _findings(delivered_then_repeated)
    assert "after a broken stream, resume it" in lost["detail"]
    assert "after a broken stream" not in kept["detail"]
    assert "why the client sent the same call again" in kept["detail"]
