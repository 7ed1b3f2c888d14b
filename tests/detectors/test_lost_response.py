"""lost-response: an accepted request no response ever answered (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.lost_response import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of
from tests.support.streams import S1, initialized

V26 = {"MCP-Protocol-Version": "2026-07-28"}
UUID = "6f1d8a4e-27b3-4c55-9a0e-3b2d1c0f9e8d"
TS_ID = f"{UUID}_1750000000001_k3"


def progress(n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken="t", progress=n)


def call(c: Capture, rid: int, blocks: list[str], how: str | None = "client_closed",
         headers: dict[str, str] = S1, method: str = "tools/call") -> str:  # fmt: skip
    f = c.request(body=req(method, rid, name="t", arguments={}), headers=headers)
    c.response(f, sse=True)
    c.chunk(f, sse(*blocks), n=0)
    if how is not None:
        c.end(f, how)
    return f


def resume(c: Capture, cursor: str, blocks: list[str], how: str = "complete") -> str:
    f = c.request("GET", headers={**S1, "Last-Event-ID": cursor})
    c.response(f, sse=True)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, how)
    return f


def broken_never_resumed(c: Capture) -> None:
    initialized(c)
    call(c, 4, [event(id="e1", data=""), event(progress(1), id="e2")])


def resumed_replay_without_response(c: Capture) -> None:
    initialized(c)
    call(c, 7, [event(id="1", data=""), event(progress(1), id="2")])
    resume(c, "2", [event(progress(2), id="3")])


def sessionless_completed_without_response(c: Capture) -> None:
    call(c, 3, [event(progress(1))], how="complete", headers=V26)


def still_open_at_capture_end(c: Capture) -> None:
    initialized(c)
    call(c, 5, [event(id=UUID, data=""), event(progress(1), id=TS_ID)], how=None)


def torn_tail(c: Capture) -> None:
    """The stream ended inside an event: the response may be in the unterminated tail."""
    initialized(c)
    f = c.request(body=req("tools/call", 8, name="t", arguments={}), headers=S1)
    c.response(f, sse=True)
    c.chunk(f, sse(event(id="e1", data="")) + 'id: e2\ndata: {"jsonrpc":"2.0","id":8,', n=0)
    c.end(f, "error", "connection reset")


def cancelled(c: Capture) -> None:
    initialized(c)
    call(c, 4, [event(id="e1", data="")])
    cancel(c, 4, reason="user")


def cancel(c: Capture, rid: int, reason: str = "Request timed out") -> None:
    f = c.request(body=req("notifications/cancelled", requestId=rid, reason=reason), headers=S1)
    c.response(f, 202)


def gave_up_after_unresumable_end(c: Capture) -> None:
    """The server ended the stream after progress 1, no result and no event id to resume from;
    the client's timeout then cancelled the request (both official SDKs do): a loss, not a
    cancellation of work under way."""
    initialized(c)
    call(c, 4, [event(progress(1))], how="complete")
    cancel(c, 4)


def gave_up_after_server_close(c: Capture) -> None:
    initialized(c)
    call(c, 6, [event(progress(1))], how="server_closed")
    cancel(c, 6)


def cancelled_before_the_server_ended_it(c: Capture) -> None:
    """Clean: the client called off a slow request; the server then stopped and ended the stream."""
    initialized(c)
    f = call(c, 4, [event(progress(1))], how=None)
    cancel(c, 4, reason="user")
    c.end(f, "complete")


def cancelled_after_a_resumable_end(c: Capture) -> None:
    """Clean: the server closed the stream with an event id (polling); the client, not yet
    back, gave up on the slow request: its cancellation, the response could still have come."""
    initialized(c)
    call(c, 4, [event(id="e1", data=""), "retry: 5000", event(progress(1), id="e2")],
         how="server_closed")  # fmt: skip
    cancel(c, 4)


def cancelled_after_closing_it_itself(c: Capture) -> None:
    """Clean: the client closed the stream itself and cancelled: its own choice."""
    initialized(c)
    call(c, 4, [event(progress(1))], how="client_closed")
    cancel(c, 4, reason="user")


def sessionless_client_closed(c: Capture) -> None:
    """2026-07-28: closing the request's stream is its cancellation."""
    call(c, 3, [event(progress(1))], how="client_closed", headers=V26)


def listen(c: Capture) -> None:
    initialized(c)
    call(c, 9, [event(id="e1", data="")], method="subscriptions/listen")


def refused(c: Capture) -> None:
    initialized(c)
    f = c.request(body=req("tools/call", 4, name="t", arguments={}), headers=S1)
    c.response(f, 404)


def replayed_on_get_incarnation(c: Capture) -> None:
    """Clean: server close with retry, resume, the response replayed on the GET incarnation."""
    initialized(c)
    call(c, 4, [event(id=TS_ID, data=""), "retry: 10"], how="server_closed")
    resume(c, TS_ID, [event(res(4, content=[]), id=f"{UUID}_1750000000002_x")])


def withheld_event(c: Capture) -> None:
    """The proxy kept only the head of an oversized result event (it redacts events whole, up
    to a bound) and counted the rest: the response is in the bytes not captured."""
    initialized(c)
    f = c.request(body=req("tools/call", 9, name="t", arguments={}), headers=S1)
    c.response(f, sse=True)
    c.chunk(f, 'id: e1\ndata: {"jsonrpc":"2.0","id":9,"result":{"content":[{"text":"xx\n\n', n=0)
    c.records[-1]["data"]["truncated_bytes"] = 9_000_000
    c.end(f, "complete")


def undecoded_stream(c: Capture) -> None:
    """The proxy could not decode the result stream (a content coding it does not know): the
    response may be in what it could not record."""
    initialized(c)
    f = c.request(body=req("tools/call", 10, name="t", arguments={}), headers=S1)
    c.response(f, sse=True)
    c.end(f, "complete", error="unsupported content-encoding: compress")


def capped_stream(c: Capture) -> None:
    """The proxy stopped decoding the stream at its bound: the rest was not recorded."""
    initialized(c)
    f = c.request(body=req("tools/call", 11, name="t", arguments={}), headers=S1)
    c.response(f, sse=True)
    c.chunk(f, sse(event(req("notifications/progress", progressToken=1, progress=1), id="e1")), n=0)
    c.records[-1]["decompress_capped"] = True
    c.end(f, "complete")


def answered_in_json_and_on_get(c: Capture) -> None:
    """Clean: one request answered in a JSON body, one 202 answered on the GET stream."""
    initialized(c)
    f = c.request(body=req("tools/list", 1), headers=S1)
    c.response(f, body=res(1, tools=[]))
    g = c.request("GET", headers=S1)
    c.response(g, sse=True)
    p = c.request(body=req("ping", 2), headers=S1)
    c.response(p, 202)
    c.chunk(g, sse(event(res(2), id="g1")), n=0)
    c.end(g, "client_closed")


def reused_id_answered_before_it(c: Capture) -> None:
    """The client reuses id 4 in its session: the first request's answer came before the second
    was sent, so it does not answer the second."""
    initialized(c)
    f = c.request(body=req("tools/call", 4, name="t", arguments={}), headers=S1)
    c.response(f, body=res(4, content=[]))
    call(c, 4, [event(id="e1", data="")])


def sessionless_ids_reused_by_short_lived_clients(c: Capture) -> None:
    """2026-07-28: three client runs under one client key each send their call as id 3: only the
    run whose own stream completed without its answer lost it (another run's answer is not its)."""
    for answered in (True, False, True):
        f = c.request(body=req("tools/call", 3, name="t", arguments={}), headers=V26)
        c.response(f, sse=True)
        c.chunk(f, sse(event(progress(1)), *([event(res(3, content=[]))] if answered else [])), n=0)
        c.end(f, "complete")


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str]]]]] = [
    (broken_never_resumed, [("high", ["4"])]),
    (resumed_replay_without_response, [("high", ["7"])]),
    (sessionless_completed_without_response, [("high", ["3"])]),
    (still_open_at_capture_end, [("info", ["5"])]),
    (torn_tail, [("info", ["8"])]),
    (withheld_event, [("info", ["9"])]),
    (undecoded_stream, [("info", ["10"])]),
    (capped_stream, [("info", ["11"])]),
    (reused_id_answered_before_it, [("high", ["4"])]),
    (sessionless_ids_reused_by_short_lived_clients, [("high", ["3"])]),
    (gave_up_after_unresumable_end, [("high", ["4"])]),
    (gave_up_after_server_close, [("high", ["6"])]),
    (cancelled, []),
    (cancelled_before_the_server_ended_it, []),
    (cancelled_after_a_resumable_end, []),
    (cancelled_after_closing_it_itself, []),
    (sessionless_client_closed, []),
    (listen, []),
    (refused, []),
    (replayed_on_get_incarnation, []),
    (answered_in_json_and_on_get, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, list[str]]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["lost-response"])
    assert found["detector"].to_list() == ["lost-response"] * len(expected)
    assert [(s, list(r)) for s, r in found.select("severity", "request_ids").rows()] == expected


def test_evidence_and_detail() -> None:
    c = Capture()
    resumed_replay_without_response(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f2"] and row["stream_ids"] == ["f2"]
    assert row["title"] == "No response to tools/call 7"
    assert "2 incarnation(s)" in row["detail"] and "event log" in row["detail"]
    assert "never cancelled it" in row["detail"]


def test_detail_of_a_request_given_up_on() -> None:
    c = Capture()
    gave_up_after_unresumable_end(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    # The stream's end record, then the cancellation 1 ms later (tests.support.records).
    assert (
        "the client cancelled it only 1 ms after the server had ended its stream without the "
        "response and without an event id to resume from"
    ) in row["detail"]
    assert "never cancelled" not in row["detail"]
