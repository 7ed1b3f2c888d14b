"""cross-replica-resume: a resume answered off the cursor's replica (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.cross_replica_resume import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
UUID = "6f1d8a4e-27b3-4c55-9a0e-3b2d1c0f9e8d"


def progress(n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken="t", progress=n)


def initialized(c: Capture, sid: str = "S1", replica: str | None = "a") -> None:
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
    c.response(
        f, body=res(0, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": sid},
        replica=replica,
    )  # fmt: skip


def call(c: Capture, rid: int, ids: list[str], *, replica: str | None = "a",
         headers: dict[str, str] = S1) -> str:  # fmt: skip
    """A tools/call stream: a priming event then progress, broken by the client."""
    f = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=headers)
    c.response(f, sse=True, replica=replica)
    blocks = [
        event(id=ids[0], data=""),
        *(event(progress(n), id=i) for n, i in enumerate(ids) if n),
    ]
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, "client_closed")
    return f


def resume(c: Capture, cursor: str, blocks: list[str], *, replica: str | None = "a",
           status: int = 200, headers: dict[str, str] = S1) -> str:  # fmt: skip
    f = c.request("GET", headers={**headers, "Last-Event-ID": cursor})
    if status != 200:
        c.response(f, status, replica=replica)
        return f
    c.response(f, sse=True, replica=replica)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f)
    return f


def round_robin(c: Capture) -> None:
    """The cursor e7 came from replica a; replica b answers the resume."""
    initialized(c)
    call(c, 4, [f"e{n}" for n in range(1, 10)])
    resume(c, "e7", [event(id="e1", data=""), event(req("notifications/message"), id="e2")],
           replica="b")  # fmt: skip


def owed_response_from_other_replica(c: Capture) -> None:
    """Clean: replica b delivers the result of the call replica a ran: the two share the
    stream's log (a shared event store), so the resume did not work by luck."""
    initialized(c)
    call(c, 2, [f"{UUID}_1750000000001_a", f"{UUID}_1750000000002_b"])
    resume(c, f"{UUID}_1750000000002_b", [event(res(2, content=[]), id=f"{UUID}_1750000000003_c")],
           replica="b")  # fmt: skip


def other_response_from_other_replica(c: Capture) -> None:
    """Replica b answers with a response, but not to the request the stream owed (4)."""
    initialized(c)
    call(c, 4, ["e1", "e2", "e3"])
    resume(c, "e3", [event(res(9, content=[]), id="e4")], replica="b")


def owed_response_after_a_hop(c: Capture) -> None:
    """Resumed on b without the response (flagged), then on a again, which delivers it: the
    delivery on a says nothing of b."""
    initialized(c)
    call(c, 4, ["1", "2", "3"])
    resume(c, "3", [event(progress(3), id="4")], replica="b")
    resume(c, "4", [event(res(4, content=[]), id="5")], replica="a")


def chain_back_on_the_issuing_replica(c: Capture) -> None:
    """Resumed on b (flagged once), then resumed again on b with b's own cursor (not flagged)."""
    initialized(c)
    call(c, 4, ["1", "2", "3"])
    resume(c, "3", [event(progress(3), id="4")], replica="b")
    resume(c, "4", [event(res(4, content=[]), id="5")], replica="b")


def same_replica(c: Capture) -> None:
    """Clean: the replica that issued the cursor replays the rest and a new priming event."""
    initialized(c)
    call(c, 3, ["p0", "p1", "p2"])
    resume(c, "p2", [event(res(3, content=[]), id="p3"), event(id="p4", data="")])


def priming_cursor_same_replica(c: Capture) -> None:
    initialized(c)
    call(c, 3, [UUID])
    resume(c, UUID, [event(res(3, content=[]), id="7b2c")])


def no_replica_information(c: Capture) -> None:
    initialized(c, replica=None)
    call(c, 4, ["e1", "e2", "e3"], replica=None)
    resume(c, "e3", [event(progress(3), id="e4")], replica=None)


def answer_lacks_replica(c: Capture) -> None:
    initialized(c)
    call(c, 4, ["e1", "e2", "e3"])
    resume(c, "e3", [event(progress(3), id="e4")], replica=None)


def answered_404_elsewhere(c: Capture) -> None:
    initialized(c)
    call(c, 4, ["e1", "e2", "e3"])
    resume(c, "e3", [], replica="b", status=404)


def foreign_cursor_elsewhere(c: Capture) -> None:
    """A cursor of session S1 sent in S2 is stale-cursor's, not a cross-replica resume."""
    initialized(c, "S1")
    call(c, 4, ["e1", "e2", "e3"])
    initialized(c, "S2", replica="b")
    resume(c, "e3", [event(id="x1", data="")], replica="b", headers={"Mcp-Session-Id": "S2"})


def header_against_upstream_address(c: Capture) -> None:
    """The answer has no replica header: its upstream address never meets a header value."""
    initialized(c)
    call(c, 4, ["e1", "e2", "e3"])
    for record in c.records:
        if record["kind"] == "response" and record["flow"] == "f2":
            record["replica_source"] = "header"
    resume(c, "e3", [event(progress(3), id="e4")], replica="127.0.0.1:9000")


CASES: list[tuple[Callable[[Capture], None], list[list[str]]]] = [
    (round_robin, [["e7"]]),
    (owed_response_from_other_replica, []),
    (other_response_from_other_replica, [["e3"]]),
    (owed_response_after_a_hop, [["3"], ["4"]]),
    (chain_back_on_the_issuing_replica, [["3"]]),
    (same_replica, []),
    (priming_cursor_same_replica, []),
    (no_replica_information, []),
    (answer_lacks_replica, []),
    (answered_404_elsewhere, []),
    (foreign_cursor_elsewhere, []),
    (header_against_upstream_address, []),
]


@pytest.mark.parametrize(("build", "event_ids"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], event_ids: list[list[str]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["cross-replica-resume"])
    assert found["detector"].to_list() == ["cross-replica-resume"] * len(event_ids)
    assert found["event_ids"].to_list() == event_ids
    assert set(found["severity"].to_list()) <= {"medium"}


def test_evidence_and_detail() -> None:
    c = Capture()
    round_robin(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f2", "f3"]  # the flow that issued the cursor, then the resume
    assert row["stream_ids"] == ["f2"]
    assert row["request_ids"] == ["4"]  # the stream still owed the response to request 4
    assert row["title"] == "resume from e7 answered by b, cursor issued by a"
    assert "issued by replica a" in row["detail"] and "replica b answered it" in row["detail"]
    assert "sticky routing" in row["detail"]
    assert row["first_ts"] < row["last_ts"]


def test_a_resume_that_owed_nothing_names_no_request() -> None:
    c = Capture()
    initialized(c)
    get = c.request("GET", headers=S1)
    c.response(get, sse=True, replica="a")
    c.chunk(get, sse(event(req("notifications/message"), id="m1")), n=0)
    c.end(get, "server_closed")
    resume(c, "m1", [event(req("notifications/message"), id="m2")], replica="b")
    ran = run_detectors(timeline_of(c), only=["cross-replica-resume"])
    assert ran["request_ids"].to_list() == [[]]
    assert ran["stream_ids"].to_list() == [["f2"]]
