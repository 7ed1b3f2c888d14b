"""Runs of empty standalone GET streams reopened at once (analyzer/timeline/reopened.py; the
finding and its `min_streams` are judged in tests/detectors/test_reconnect_storm.py)."""

from __future__ import annotations

from analyzer.timeline import reopened
from tests.support.records import Capture, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def standalone(c: Capture, at: float, *, open_ms: float = 1.0, prime: bool = False) -> str:
    """A GET without a cursor at `at` ms, answered 200 at once and ended by the server
    `open_ms` later (after a priming event if `prime`)."""
    g = c.request("GET", headers={**S1, "Accept": "text/event-stream"}, at=at)
    c.response(g, sse=True, at=at + 0.5)
    if prime:
        c.chunk(g, sse("id: p\ndata: "), n=0, at=at + 0.6)
    c.end(g, "complete", at=at + 0.5 + open_ms)
    return g


def test_a_stream_with_an_event_a_long_one_or_a_late_one_ends_the_run() -> None:
    c = Capture()
    initialized(c)
    a, b = standalone(c, 10), standalone(c, 20)
    standalone(c, 30, prime=True)
    d = standalone(c, 40)
    standalone(c, 50, open_ms=9000)
    f = standalone(c, 9600)
    g = standalone(c, 30_000)  # 20 s after the previous end
    got = reopened.empty_runs(timeline_of(c), max_open_s=5.0, max_gap_s=5.0).sort("first_ts")
    assert rows(got, "session_id", "flow_ids") == [
        ("mcp:S1", [a, b]),
        ("mcp:S1", [d]),
        ("mcp:S1", [f]),
        ("mcp:S1", [g]),
    ]


def test_the_thresholds_decide_what_is_empty_and_at_once() -> None:
    c = Capture()
    initialized(c)
    a, b = standalone(c, 10, open_ms=2000), standalone(c, 3000, open_ms=2000)
    assert rows(reopened.empty_runs(timeline_of(c), max_open_s=1.0, max_gap_s=5.0), "_run") == []
    got = reopened.empty_runs(timeline_of(c), max_open_s=5.0, max_gap_s=5.0)
    assert rows(got, "flow_ids") == [([a, b],)]
