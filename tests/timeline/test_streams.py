"""analyzer.timeline.streams: logical streams, incarnations, cursor resolution."""

from __future__ import annotations

from tests.support.records import Capture, event, req, res, rows, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}


def _call_with_resumes() -> Capture:
    """A POST stream broken twice; the second resume carries the cursor of the first."""
    c = Capture()
    p = c.request(body=req("tools/call", 5, name="t", arguments={}), headers=S1)
    c.response(p, sse=True, replica="r1")
    c.chunk(p, sse(event(id="a0", data=""), event({"n": 1}, id="a1")), n=0)
    c.end(p, "client_closed")
    g1 = c.request("GET", headers={**S1, "Last-Event-ID": "a1"})
    c.response(g1, sse=True, replica="r2")
    c.chunk(g1, sse(event({"n": 2}, id="a2")), n=0)
    c.end(g1, "server_closed")
    g2 = c.request("GET", headers={**S1, "Last-Event-ID": "a2"})
    c.response(g2, sse=True, replica="r2")
    c.chunk(g2, sse(event(res(5, content=[]), id="a3")), n=0)
    c.end(g2)
    standalone = c.request("GET", headers=S1)
    c.response(standalone, sse=True)
    c.chunk(standalone, sse(event(id="b0", data="")), n=0)
    stale = c.request("GET", headers={**S1, "Last-Event-ID": "zz"})
    c.response(stale, sse=True)
    refused = c.request("GET", headers={**S1, "Last-Event-ID": "a0"})
    c.response(refused, 409)
    return c


def test_resumes_are_incarnations_of_the_stream_that_issued_the_cursor() -> None:
    timeline = timeline_of(_call_with_resumes())
    assert rows(timeline.incarnations, "stream_id", "flow_id", "incarnation", "cursor") == [
        ("f1", "f1", 0, None),
        ("f1", "f2", 1, "a1"),
        ("f1", "f3", 2, "a2"),
        ("f4", "f4", 0, None),
        ("f5", "f5", 0, None),
    ]
    assert rows(
        timeline.streams, "stream_id", "kind", "request_id", "stale_cursor", "incarnations",
        "events", "payload_events", "response_delivered", "response_incarnation", "last_end_how",
    ) == [
        ("f1", "post", "5", None, 3, 4, 3, True, 2, "complete"),
        ("f4", "get", None, None, 1, 1, 0, None, None, None),
        ("f5", "get", None, "zz", 1, 0, 0, None, None, None),
    ]  # fmt: skip


def test_events_and_messages_are_placed_in_their_stream() -> None:
    timeline = timeline_of(_call_with_resumes())
    events = timeline.sse_events.collect().sort("ts", "seq", "ordinal")
    assert rows(events, "event_id", "stream_id", "incarnation", "stream_pos") == [
        ("a0", "f1", 0, 0),
        ("a1", "f1", 0, 1),
        ("a2", "f1", 1, 2),
        ("a3", "f1", 2, 3),
        ("b0", "f4", 0, 0),
    ]
    response = timeline.messages.collect().filter(kind="response")
    assert rows(response, "stream_id", "incarnation", "flow_id", "event_id") == [
        ("f1", 2, "f3", "a3")
    ]
    exchange = timeline.exchanges.collect().filter(flow_id="f6")
    assert rows(exchange, "stream_id", "sse", "status") == [(None, False, 409)]


def test_a_cursor_resolves_to_its_latest_issue_before_the_request() -> None:
    """A replay re-sends an id on a later incarnation; a resume after it chains from there."""
    c = Capture()
    p = c.request(body=req("tools/call", 1, name="t"), headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse(event({"n": 1}, id="e1"), event({"n": 2}, id="e2")), n=0)
    c.end(p, "client_closed")
    g1 = c.request("GET", headers={**S1, "Last-Event-ID": "e1"})
    c.response(g1, sse=True)
    c.chunk(g1, sse(event({"n": 2}, id="e2")), n=0)  # replay of e2
    c.end(g1, "server_closed")
    g2 = c.request("GET", headers={**S1, "Last-Event-ID": "e2"})
    c.response(g2, sse=True)
    timeline = timeline_of(c)
    assert rows(timeline.resumptions, "flow_id", "cursor_flow_id", "cursor_incarnation") == [
        ("f2", "f1", 0),
        ("f3", "f2", 1),
    ]
    assert rows(timeline.incarnations, "flow_id", "incarnation") == [
        ("f1", 0),
        ("f2", 1),
        ("f3", 2),
    ]


def test_a_cursor_of_another_session_opens_a_new_stream() -> None:
    c = Capture()
    p = c.request("GET", headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse(event({"n": 1}, id="x1")), n=0)
    g = c.request("GET", headers={"Mcp-Session-Id": "S2", "Last-Event-ID": "x1"})
    c.response(g, sse=True)
    timeline = timeline_of(c)
    assert rows(timeline.streams, "session_id", "stream_id", "stale_cursor") == [
        ("mcp:S1", "f1", None),
        ("mcp:S2", "f2", "x1"),
    ]


def test_a_priming_event_issues_a_cursor() -> None:
    c = Capture()
    p = c.request(body=req("tools/call", 1, name="t"), headers=S1)
    c.response(p, sse=True)
    c.chunk(p, sse(event(id="p0", data="")), n=0)
    c.end(p, "server_closed")
    g = c.request("GET", headers={**S1, "Last-Event-ID": "p0"})
    c.response(g, sse=True)
    timeline = timeline_of(c)
    assert rows(timeline.incarnations, "flow_id", "stream_id", "incarnation") == [
        ("f1", "f1", 0),
        ("f2", "f1", 1),
    ]


def test_an_id_issued_twice_in_one_chunk_resolves_to_the_later_issue() -> None:
    # A constant id: the chunk's events share its time and record number; wire order is their
    # place in the chunk, so the cursor stands after the last of them (nothing carried after).
    c = Capture()
    p = c.request(body=req("tools/call", 5, name="t", arguments={}), headers=S1)
    c.response(p, sse=True)
    progress = [req("notifications/progress", progressToken=1, progress=k) for k in (1, 2)]
    c.chunk(p, sse(event(id="0", data=""), *(event(m, id="0") for m in progress)), n=0)
    c.end(p, "client_closed")
    g = c.request("GET", headers={**S1, "Last-Event-ID": "0"})
    c.response(g, sse=True)
    c.end(g)
    timeline = timeline_of(c)
    assert rows(timeline.resumptions, "cursor_stream_id", "events_after") == [("f1", 0)]
