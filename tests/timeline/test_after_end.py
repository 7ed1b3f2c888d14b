"""What a server still accepted after its session ended (analyzer/timeline/after_end.py; the
finding is judged in tests/detectors/test_resume_after_termination.py)."""

from __future__ import annotations

from analyzer.timeline import after_end
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def test_requests_after_a_delete_are_gathered_per_session_and_in_flight_ones_left_out() -> None:
    c = Capture()
    initialized(c)
    p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=S1, at=10.0)
    c.response(p, sse=True, at=11.0)
    c.chunk(p, sse(event(id="e1", data="")), n=0, at=12.0)
    c.end(p, "server_closed", at=13.0)
    in_flight = c.request(body=req("tools/list", 2), headers=S1, at=20.0)
    d = c.request("DELETE", headers=S1, at=30.0)
    c.response(d, 200, at=31.0)
    c.response(in_flight, body=res(2, tools=[]), at=32.0)
    g = c.request("GET", headers={**S1, "Last-Event-ID": "e1"}, at=40.0)
    c.response(g, sse=True, at=41.0)
    c.chunk(g, sse(event(res(1, content=[]), id="e2")), n=0, at=42.0)
    c.end(g, "complete", at=43.0)
    refused = c.request(body=req("tools/list", 3), headers=S1, at=50.0)
    c.response(refused, 404, at=51.0)
    got = after_end.accepted(timeline_of(c))
    assert rows(got, "_end_how", "_end_flow", "_flows", "event_ids", "_resumes") == [
        ("delete", d, [g], ["e1"], 1)
    ]


def test_a_session_that_never_ended_accepts_nothing_after_its_end() -> None:
    c = Capture()
    initialized(c)
    f = c.request(body=req("tools/list", 1), headers=S1)
    c.response(f, body=res(1, tools=[]))
    assert rows(after_end.accepted(timeline_of(c)), "session_id") == []
