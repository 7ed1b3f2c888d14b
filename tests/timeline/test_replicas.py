"""Resumes answered off their cursor's replica by one that does not read the stream's log
(analyzer/timeline/replicas.py; the finding is judged in tests/detectors/
test_cross_replica_resume.py)."""

from __future__ import annotations

from analyzer.timeline import replicas
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1


def called(c: Capture, rid: int, ids: list[str]) -> None:
    """initialize on replica a, then tools/call `rid` on a with id-only events, broken."""
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers=S1, replica="a")
    f = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=S1)
    c.response(f, sse=True, replica="a")
    c.chunk(f, sse(*(event(id=i, data="") for i in ids)), n=0)
    c.end(f, "client_closed")


def resumed(c: Capture, cursor: str, block: str, replica: str) -> str:
    f = c.request("GET", headers={**S1, "Last-Event-ID": cursor})
    c.response(f, sse=True, replica=replica)
    c.chunk(f, sse(block), n=0)
    c.end(f)
    return f


def test_a_resume_answered_by_another_replica_is_kept_one_on_the_same_is_not() -> None:
    c = Capture()
    called(c, 4, ["e1", "e2"])
    resumed(c, "e1", event(id="e3", data=""), "a")
    moved = resumed(c, "e2", event(id="e4", data=""), "b")
    got = replicas.moved_resumes(timeline_of(c))
    assert rows(got, "flow_id", "cursor", "cursor_replica", "answer_replica", "request_id") == [
        (moved, "e2", "a", "b", "4")
    ]


def test_another_replica_that_delivers_the_owed_response_reads_the_log() -> None:
    c = Capture()
    called(c, 2, ["e1"])
    resumed(c, "e1", event(res(2, content=[]), id="e2"), "b")
    assert rows(replicas.moved_resumes(timeline_of(c)), "flow_id") == []
