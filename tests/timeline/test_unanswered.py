"""The requests no answer answered, with where their response could have been (analyzer/
timeline/unanswered.py; the finding is judged in tests/detectors/test_lost_response.py)."""

from __future__ import annotations

from analyzer.timeline import unanswered
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def call(c: Capture, rid: int, blocks: list[str], how: str | None) -> str:
    f = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=S1)
    c.response(f, sse=True)
    c.chunk(f, sse(*blocks), n=0)
    if how is not None:
        c.end(f, how)
    return f


def test_requests_keep_the_unanswered_with_their_stream_and_cancellation() -> None:
    c = Capture()
    initialized(c)
    call(c, 1, [event(res(1, content=[]), id="a1")], "complete")  # answered: left out
    call(c, 2, [event(id="b1", data="")], "client_closed")  # a cursor, never resumed
    call(c, 3, [event(req("notifications/progress", progressToken="t", progress=1))], "complete")
    f = c.request(body=req("notifications/cancelled", requestId=3), headers=S1)
    c.response(f, 202)
    call(c, 4, [event(id="d1", data="")], None)  # still open at capture end
    tl = timeline_of(c)
    got = unanswered.requests(tl).sort("ts")
    assert rows(got, "rpc_id", "status", "incarnations", "how", "no_cursor", "unseen") == [
        ("2", 200, 1, "client_closed", None, False),
        ("3", 200, 1, "complete", True, False),
        ("4", 200, 1, None, None, False),
    ]
    cancelled = rows(got, "rpc_id", "cancel_ts")
    assert [r for r, at in cancelled if at is not None] == ["3"]


def test_open_get_sessions_name_a_session_with_a_get_stream_open_at_capture_end() -> None:
    c = Capture()
    initialized(c)
    for how in ("client_closed", None):
        g = c.request("GET", headers=S1)
        c.response(g, sse=True)
        if how is not None:
            c.end(g, how)
            assert unanswered.open_get_sessions(timeline_of(c)).collect().is_empty()
    assert rows(unanswered.open_get_sessions(timeline_of(c)), "get_open") == [(True,)]
