"""duplicate-response: one request answered twice, or one message on two streams (detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors.duplicate_response import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of
from tests.support.streams import (
    S1,
    Session,
    findings,
    initialized,
    prime,
    replay_with_another_result,
    response_on_two_streams,
    shared_store_two_answers,
    stream,
)
from tests.support.streams import (
    ticket_call as call,
)

V26 = {"MCP-Protocol-Version": "2026-07-28"}
UUID = "3c9e2a71-8b4d-4f6a-a1e5-7d2c9b0e4f18"


def note() -> dict[str, object]:
    return req("notifications/message", level="info", data="hello")


def event_on_two_streams(c: Capture) -> None:
    """One event (same id and payload) sent fresh on two logical streams."""
    initialized(c)
    tagged = f"{UUID}_1750000000001_z"
    stream(c, [event(note(), id=tagged), event(res(6, content=[]), id="a")], body=call(6))
    stream(c, [event(note(), id=tagged), event(res(7, content=[]), id="b")], body=call(7))


def correct_replay(c: Capture) -> None:
    """Clean: the resume replays request 4's response unchanged on a GET incarnation."""
    initialized(c)
    stream(c, [event(id="e1", data=""), event(res(4, content=["T-1"]), id="e2")], body=call(4),
           how="server_closed")  # fmt: skip
    stream(c, [event(res(4, content=["T-1"]), id="e2"), event(id="e3", data="")],
           headers={**S1, "Last-Event-ID": "e1"})  # fmt: skip


def equal_notifications_fresh_ids(c: Capture) -> None:
    """Clean: equal payloads under fresh ids are new messages; priming ids carry no payload."""
    initialized(c)
    stream(c, [event(id="p", data=""), event(note(), id="n1"), event(res(1, content=[]))],
           body=call(1))  # fmt: skip
    stream(c, [event(id="p", data=""), event(note(), id="n2"), event(res(2, content=[]))],
           body=call(2))  # fmt: skip


def sessionless_ids_per_exchange(c: Capture) -> None:
    """Clean: in 2026-07-28 a response belongs to its exchange; ids may recur across them."""
    for result in ("one", "two"):
        f = c.request(body=call(1), headers=V26)
        c.response(f, body=res(1, content=[result]))


def sessionless_exchange_answered_twice(c: Capture) -> None:
    """In 2026-07-28 one exchange carried two different results to its request."""
    stream(c, [event(res(1, content=["one"])), event(res(1, content=["two"]))], body=call(1),
           headers=V26)  # fmt: skip


def session_gone_twice(c: Capture) -> None:
    """Clean: after a server restart a request and the DELETE of the forgotten session each get
    404 with a null-id error (they answer no request; the client then initializes again)."""
    initialized(c)
    gone = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
    for method, body in (("POST", call(5)), ("DELETE", None)):
        f = c.request(method, body=body, headers=S1)
        c.response(f, status=404, body=gone)
    gone["error"] = {"code": -32600, "message": "Mcp-Session-Id header is required"}
    f = c.request(body=call(6))
    c.response(f, status=400, body=gone)


def reused_id_answered_on_each_stream(c: Capture) -> None:
    """Clean: the session key holds two requests with id 5 (a client reused it, or two clients
    of one host share a 2025 key without sessions); each is answered once, on its own stream."""
    initialized(c)
    stream(c, [event(res(5, content=["T-1"]), id="a1")], body=call(5))
    stream(c, [event(res(5, content=["T-2"]), id="b1")], body=call(5))


def reused_id_answered_again_on_the_get_stream(c: Capture) -> None:
    """Id 5 reused: the second request's response also went out, fresh, on the GET stream (it
    is the latest request with that id: the first request's answer is not part of it)."""
    initialized(c)
    g = c.request("GET", headers=S1)
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="10", data="")), n=0)
    stream(c, [event(res(5, content=["T-1"]), id="11")], body=call(5))
    stream(c, [event(res(5, content=["T-2"]), id="12")], body=call(5))
    c.chunk(g, sse(event(res(5, content=["T-2"]), id="13")), n=1)
    c.end(g, "client_closed")


def resume_answers_twice(c: Capture) -> None:
    """The resume of request 3's stream carries two different answers to it."""
    s = Session(c, "S1")
    s.call(3, prime("1"), end="server_closed")
    s.resume("1", event(res(3, content=["T-1"]), id="2"), event(res(3, content=["T-2"]), id="3"))


def response_replayed_onto_another_stream(c: Capture) -> None:
    """Request 4's response (same id and payload) comes back on the resume of request 5's
    stream: cross-stream-replay's finding, not a second answer."""
    initialized(c)
    stream(c, [event(id="a0", data=""), event(res(4, content=["T-1"]), id="a1")], body=call(4))
    stream(c, [event(id="b0", data="")], body=call(5), how="server_closed")
    stream(c, [event(res(4, content=["T-1"]), id="a1"), event(res(5, content=[]), id="b1")],
           headers={**S1, "Last-Event-ID": "b0"})  # fmt: skip


def step(k: int) -> dict[str, object]:
    return req("notifications/message", level="info", data=f"step {k}")


def constant_ids_call_reissued(c: Capture) -> None:
    """Clean: a server issues one id for every event; the client cancels request 6 and calls
    again as 7, whose stream repeats the steps under that id. An id issued with several
    payloads names no message (duplicate-event-id's finding): equal steps are new messages."""
    initialized(c)
    stream(
        c,
        [event(step(1), id="0"), event(step(2), id="0")],
        body=call(6),
        how="client_closed",
    )
    c.request(body=req("notifications/cancelled", requestId=6), headers=S1)
    stream(c, [event(step(k), id="0") for k in (1, 2, 3)] + [event(res(7, content=[]), id="0")],
           body=call(7))  # fmt: skip


def sessionless_reissue_constant_ids(c: Capture) -> None:
    """Clean: 2026-07-28, the client's stream broke and it re-issued the call under a new id;
    both streams carry their steps under one constant event id."""
    stream(c, [event(step(1), id="0"), event(step(2), id="0")], body=call(1), how="client_closed",
           headers=V26)  # fmt: skip
    stream(c, [event(step(k), id="0") for k in (1, 2, 3)] + [event(res(2, content=[]), id="0")],
           body=call(2), headers=V26)  # fmt: skip


def sessionless_ids_per_stream(c: Capture) -> None:
    """Clean: 2026-07-28 ids need be unique in their stream only (no session to span): a
    re-issued call's stream numbers its steps from 1 again, with the same payloads."""
    stream(c, [event(step(1), id="1"), event(step(2), id="2")], body=call(1), how="client_closed",
           headers=V26)  # fmt: skip
    stream(c, [event(step(1), id="1"), event(step(2), id="2"), event(res(2, content=[]), id="3")],
           body=call(2), headers=V26)  # fmt: skip


def answered_twice_by_lockstep_counters(c: Capture) -> None:
    """A's resume answers request 3 twice; B, an identical client numbering its own events,
    got the first answer's id and payload fresh: a second answer, not another session's."""
    a, b = Session(c, "A"), Session(c, "B")
    a.call(3, prime("1"), end="server_closed")
    a.resume("1", event(res(3, content=["T-1"]), id="2"), event(res(3, content=["T-2"]), id="3"))
    b.call(3, prime("1"), event(res(3, content=["T-1"]), id="2"), end="complete")


CASES: list[tuple[Callable[[Capture], None], list[tuple[list[str], list[str]]]]] = [
    (replay_with_another_result, [(["4"], ["e2", "e3"])]),
    (response_on_two_streams, [(["5"], ["11", "12"])]),
    (event_on_two_streams, [([], [f"{UUID}_1750000000001_z"])]),
    (correct_replay, []),
    (equal_notifications_fresh_ids, []),
    (sessionless_ids_per_exchange, []),
    (sessionless_exchange_answered_twice, [(["1"], [])]),
    (session_gone_twice, []),
    (reused_id_answered_on_each_stream, []),
    (reused_id_answered_again_on_the_get_stream, [(["5"], ["12", "13"])]),
    (resume_answers_twice, [(["3"], ["2", "3"])]),
    (shared_store_two_answers, []),  # cross-session-replay's
    (response_replayed_onto_another_stream, []),  # cross-stream-replay's
    (constant_ids_call_reissued, []),  # duplicate-event-id's
    (answered_twice_by_lockstep_counters, [(["3"], ["2", "3"])]),
    (sessionless_reissue_constant_ids, []),  # duplicate-event-id's
    (sessionless_ids_per_stream, []),
]


def test_a_response_replayed_onto_another_stream_is_cross_stream_replays() -> None:
    found = findings(response_replayed_onto_another_stream, "cross-stream-replay", opened=False)
    assert found.select("event_ids", "request_ids", "stream_ids").rows() == [
        (["a1"], ["4"], ["f3", "f2"])
    ]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(
    build: Callable[[Capture], None], expected: list[tuple[list[str], list[str]]]
) -> None:
    found = findings(build, "duplicate-response", opened=False)
    assert found["detector"].to_list() == ["duplicate-response"] * len(expected)
    assert set(found["severity"].to_list()) <= {"high"}
    got = [(list(r), list(e)) for r, e in found.select("request_ids", "event_ids").rows()]
    assert got == expected


def test_evidence_and_detail() -> None:
    c = Capture()
    response_on_two_streams(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["stream_ids"] == ["f3", "f2"]
    assert row["title"] == "Duplicate response: the response to request 5 sent on 2 logical streams"
    assert "idempotency keys" in row["detail"]
