"""analyzer.timeline.dating: events of inputs without per-event times, dated."""

from __future__ import annotations

import polars as pl

from analyzer.timeline.dating import EVENT_DATES, dated
from tests.support.records import Capture, event, ms, req, res, rows, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}


def _ts(at: float) -> object:
    return pl.Series([ms(at)]).cast(pl.Datetime("ns", "UTC")).item()


def test_a_legacy_stream_answers_after_the_request_it_answers() -> None:
    # A dump of a legacy /sse stream: its body is one chunk timed at the response's end (100),
    # which also answers a POST sent at 50 (long after the stream opened at 1).
    c = Capture()
    g = c.request("GET", "/sse", at=0)
    c.response(g, sse=True, at=1)
    post = c.request("POST", "/messages/?session_id=abc", req("tools/call", 1, name="t"), at=50)
    c.response(post, 202, at=51)
    c.end(post, at=52)
    answer = res(1, content=[])
    text = sse(event("/messages/?session_id=abc", event="endpoint"), event(answer), event(answer))
    c.chunk(g, text, n=0, at=100)
    c.end(g, at=100)
    timeline = timeline_of(c)
    events = timeline.sse_events.filter(pl.col("flow_id") == g).sort("ordinal")
    # The endpoint event when the response started; each answer not before its request, nor
    # before the event before it; none after the response's end.
    assert rows(events, "ordinal", "ts") == [(0, _ts(1)), (1, _ts(50)), (2, _ts(50))]
    answers = timeline.messages.filter(pl.col("kind") == "response")
    assert rows(answers, "ts") == [(_ts(50),), (_ts(50),)]


def _flows(c: Capture) -> None:
    """Two streams of one session issuing the same priming id "p": A (complete, a dump dates
    its events at its end, 15) opened before B (broken: its events at its start, 11)."""
    a = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=S1, at=0)
    c.response(a, sse=True, at=1)
    c.chunk(a, sse(event(id="p", data=""), event(res(1, content=[]), id="a1")), n=0, at=15)
    c.end(a, at=15)
    b = c.request(body=req("tools/call", 2, name="t", arguments={}), headers=S1, at=10)
    c.response(b, sse=True, at=11)
    c.chunk(b, sse(event(id="p", data="")), n=0, at=11)
    c.end(b, "error", error="connection reset", at=11)
    g = c.request("GET", headers={**S1, "Last-Event-ID": "p"}, at=20)
    c.response(g, sse=True, at=21)
    c.end(g, at=22)


def test_a_cursor_resolves_to_the_stream_that_issued_it_last_on_the_wire() -> None:
    c = Capture()
    _flows(c)
    # A's "p" was sent when its response started (1), B's at 11: the resume continues B.
    assert rows(timeline_of(c).resumptions, "cursor_stream_id") == [("f2",)]


def test_times_of_a_capture_with_per_event_times_are_kept() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=S1, at=0)
    c.response(f, sse=True, at=1)
    c.chunk(f, sse(event(id="e1", data=""), event(res(1, content=[]), id="e2")), n=0, at=5)
    c.end(f, at=6)  # ended after its last chunk: the chunk's time is the events' own
    events = timeline_of(c).sse_events.sort("ordinal")
    assert rows(events, "ts") == [(_ts(5),), (_ts(5),)]


def test_dated_leaves_rows_without_a_date() -> None:
    frame = pl.LazyFrame({"flow_id": ["f1", "f1"], "ordinal": [0, 1], "ts": [_ts(9), _ts(9)]})
    dates = pl.LazyFrame({"flow_id": ["f1"], "ordinal": [1], "dated_ts": [_ts(3)]}, EVENT_DATES)
    assert dated(frame, dates).collect().rows() == [("f1", 0, _ts(9)), ("f1", 1, _ts(3))]
    assert dated(frame, None).collect().equals(frame.collect())
