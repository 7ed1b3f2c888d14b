"""Each resume with the incarnation it follows and the retry it owed (analyzer/timeline/
waits.py; the finding and its tolerance are judged in tests/detectors/test_retry_violation.py)."""

from __future__ import annotations

from analyzer.timeline import waits
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def test_a_resume_follows_the_latest_incarnation_and_keeps_the_last_retry_seen() -> None:
    c = Capture()
    initialized(c)
    p = c.request(body=req("tools/call", 2, name="t", arguments={}), headers=S1, at=10)
    c.response(p, sse=True)
    c.chunk(p, sse("retry: 1000\nid: 7\ndata: "), n=0)
    c.end(p, "server_closed", at=20)
    g = c.request("GET", headers={**S1, "Last-Event-ID": "7"}, at=1100)
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="8", data="")), n=0)  # no retry of its own
    c.end(g, "complete", at=1110)
    g2 = c.request("GET", headers={**S1, "Last-Event-ID": "8"}, at=1200)
    c.response(g2, sse=True)
    c.chunk(g2, sse(event(res(2, content=[]), id="9")), n=0)
    c.end(g2)
    got = waits.after_retry(timeline_of(c)).sort("ts")
    assert rows(got, "flow_id", "_prev_flow", "_prev_end", "_retry_ms", "_wait_ms") == [
        (g, p, "server_closed", 1000, 1080.0),
        (g2, g, "complete", 1000, 90.0),
    ]


def test_a_stream_that_never_sent_retry_owes_no_wait() -> None:
    c = Capture()
    initialized(c)
    p = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=S1, at=10)
    c.response(p, sse=True)
    c.chunk(p, sse("id: 7\ndata: "), n=0)
    c.end(p, "server_closed", at=20)
    g = c.request("GET", headers={**S1, "Last-Event-ID": "7"}, at=30)
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(1, content=[]), id="8")), n=0)
    c.end(g)
    got = waits.after_retry(timeline_of(c))
    assert rows(got, "flow_id", "_prev_flow", "_retry_ms", "_wait_ms") == [(g, None, None, None)]
