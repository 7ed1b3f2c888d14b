"""The incarnations a later resume left open and silent (analyzer/timeline/orphans.py; the
finding is judged in tests/detectors/test_orphaned_incarnation.py)."""

from __future__ import annotations

import pytest

from analyzer.timeline import orphans
from tests.support.records import Capture, event, req, res, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def resumed_twice(c: Capture, *, a_ends_at: float, a_fed_after: bool = False) -> None:
    """tools/call 7 broken after event 1; GET A resumes from 1 at 100 ms, GET B from 1 again
    at 200 ms and finishes the call. A ends at `a_ends_at` ms (and with `a_fed_after` carries
    one more event at 300 ms first)."""
    initialized(c)
    p = c.request(body=req("tools/call", 7, name="slow", arguments={}), headers=S1, at=10.0)
    c.response(p, sse=True, at=11.0)
    c.chunk(p, sse(event(req("notifications/progress", progress=1), id="1")), n=0, at=12.0)
    c.end(p, "client_closed", at=50.0)
    resume = {**S1, "Last-Event-ID": "1"}
    a = c.request("GET", headers=resume, at=100.0)
    c.response(a, sse=True, at=101.0)
    b = c.request("GET", headers=resume, at=200.0)
    c.response(b, sse=True, at=201.0)
    c.chunk(b, sse(event(res(7, content=[]), id="2")), n=0, at=202.0)
    c.end(b, "complete", at=205.0)
    if a_fed_after:
        c.chunk(a, sse(event(req("notifications/progress", progress=2), id="3")), n=0, at=300.0)
    c.end(a, "client_closed", at=a_ends_at)


def test_an_open_silent_incarnation_is_paired_with_the_resume_that_orphaned_it() -> None:
    c = Capture()
    resumed_twice(c, a_ends_at=5000.0)
    got = orphans.orphaned(timeline_of(c), overlap_s=1.0)
    assert rows(got, "incarnation", "_new_cursor", "kind", "request_id") == [(1, "1", "post", "7")]


@pytest.mark.parametrize(
    ("a_ends_at", "a_fed_after", "overlap_s"),
    [(900.0, False, 1.0), (5000.0, False, 10.0), (5000.0, True, 1.0)],
    ids=["ended-within-overlap", "longer-overlap", "fed-after-the-resume"],
)
def test_an_incarnation_that_ended_or_was_fed_is_not_orphaned(
    a_ends_at: float, a_fed_after: bool, overlap_s: float
) -> None:
    c = Capture()
    resumed_twice(c, a_ends_at=a_ends_at, a_fed_after=a_fed_after)
    assert rows(orphans.orphaned(timeline_of(c), overlap_s=overlap_s), "flow_id") == []
