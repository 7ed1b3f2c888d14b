"""Runs of resumes that brought nothing while a response was owed (analyzer/timeline/
fruitless.py; the finding and its `min_resumes` are judged in tests/detectors/
test_resume_loop.py)."""

from __future__ import annotations

from analyzer.timeline import fruitless
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def polled(c: Capture, answers: list[str]) -> list[str]:
    """tools/call 1 closed after a priming event, then one resume per answer ("prime": a new
    priming event; "progress": a notification; "result": the response); the GETs' flow ids."""
    initialized(c)
    p = c.request(body=req("tools/call", 1, name="slow", arguments={}), headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse("retry: 10\nid: 0\ndata: "), n=0)
    c.end(p, "complete")
    gets = []
    for n, answer in enumerate(answers, start=1):
        g = c.request("GET", headers={**S1, "Last-Event-ID": str(n - 1)}, at=20.0 * n)
        c.response(g, sse=True)
        if answer == "progress":
            note = req("notifications/progress", progressToken="p", progress=n)
            c.chunk(g, sse(event(note, id=str(n))), n=0)
        elif answer == "result":
            c.chunk(g, sse(event(res(1, content=[]), id=str(n))), n=0)
        else:
            c.chunk(g, sse(f"retry: 10\nid: {n}\ndata: "), n=0)
        c.end(g, "complete")
        gets.append(g)
    return gets


def test_a_resume_that_brought_a_message_splits_the_runs() -> None:
    c = Capture()
    g = polled(c, ["prime", "prime", "progress", "prime"])
    got = fruitless.runs(timeline_of(c)).sort("first_ts")
    assert rows(got, "request_id", "flow_ids", "event_ids") == [
        ("1", [g[0], g[1]], ["0", "1"]),
        ("1", [g[3]], ["3"]),
    ]


def test_a_stream_whose_response_came_has_no_run() -> None:
    c = Capture()
    polled(c, ["prime", "prime", "result"])
    assert rows(fruitless.runs(timeline_of(c)), "stream_id") == []
