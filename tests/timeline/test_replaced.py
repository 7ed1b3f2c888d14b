"""Replaced standalone GET streams resumed after their replacement (analyzer/timeline/
replaced.py; the finding and its severity are judged in tests/detectors/
test_superseded_stream.py)."""

from __future__ import annotations

from analyzer.timeline import replaced
from tests.support.records import Capture, event, req, rows, sse, timeline_of
from tests.support.streams import S1, initialized


def standalone(
    c: Capture, ids: list[str], *, cursor: str | None = None, how: str = "complete"
) -> str:
    """A GET stream (resuming `cursor` if given) carrying one notification per id."""
    f = c.request("GET", headers={**S1, **({"Last-Event-ID": cursor} if cursor else {})})
    c.response(f, sse=True)
    note = req("notifications/message", level="info", data="x")
    c.chunk(f, sse(*(event(note, id=i) for i in ids)), n=0)
    c.end(f, how)
    return f


def test_a_resume_after_the_replacement_is_paired_with_the_stream_that_replaced_it() -> None:
    c = Capture()
    initialized(c)
    old = standalone(c, ["a1"])
    standalone(c, ["a2"], cursor="a1")  # before the replacement: not gathered
    new = standalone(c, ["b1"])
    late = standalone(c, ["a3"], cursor="a2")
    standalone(c, ["b2"], cursor="b1")  # the latest stream's resume
    got = replaced.resumed(timeline_of(c))
    assert rows(got, "stream_id", "_new_stream_id", "flow_ids", "event_ids", "_kept") == [
        (old, new, [late], ["a2"], False)
    ]


def test_an_older_stream_still_connected_when_the_newer_opened_was_kept() -> None:
    c = Capture()
    initialized(c)
    g1 = c.request("GET", headers=S1)
    c.response(g1, sse=True)
    c.chunk(g1, sse(event(id="a1", data="")), n=0)
    new = standalone(c, ["b1"])
    c.end(g1, "client_closed")
    late = standalone(c, [], cursor="a1")
    got = replaced.resumed(timeline_of(c))
    assert rows(got, "stream_id", "_new_stream_id", "flow_ids", "_kept") == [
        (g1, new, [late], True)
    ]
