"""The OTLP span mapping (analyzer/otlp/spans.py) on hand-built captures."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from analyzer.findings import empty_findings, findings_frame
from analyzer.otlp.spans import (
    FINDING_EVENT,
    SSE_EVENT,
    batches,
    timeline_spans,
)
from tests.support.records import Capture, event, ms, req, res, sse, timeline_of

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
V = "2025-11-25"


def _initialize(c: Capture, session: str | None) -> dict[str, str]:
    f = c.request(
        body=req(
            "initialize",
            1,
            protocolVersion=V,
            capabilities={},
            clientInfo={"name": "t", "version": "1"},
        )
    )
    headers = {"mcp-session-id": session} if session else {}
    c.response(
        f,
        body=res(1, protocolVersion=V, capabilities={}, serverInfo={"name": "s", "version": "1"}),
        headers=headers,
    )
    return {**headers, "mcp-protocol-version": V}


def _resumed_call(c: Capture, h: dict[str, str], *, meta: dict[str, Any] | None = None) -> None:
    """A tools/call whose stream breaks after a priming event and one progress, then a GET
    resumes from e1 and gets the result."""
    params: dict[str, Any] = {"name": "pay", "arguments": {"amount": 5}}
    if meta is not None:
        params["_meta"] = meta
    call = c.request(body=req("tools/call", 2, **params), headers=h)
    c.response(call, sse=True, headers=h)
    c.chunk(call, "id: p1\nretry: 500\ndata: \n\n", n=0)
    c.chunk(
        call, sse(event(req("notifications/progress", progressToken=1, progress=1), id="e1")), n=1
    )
    c.end(call, "client_closed")
    get = c.request("GET", headers={**h, "last-event-id": "e1", "accept": "text/event-stream"})
    c.response(get, sse=True, headers=h)
    c.chunk(get, sse(event(res(2, content=[{"type": "text", "text": "paid"}]), id="e2")), n=0)
    c.end(get)


def _sessioned(meta: dict[str, Any] | None = None) -> Capture:
    c = Capture().open()
    h = _initialize(c, "s1")
    _resumed_call(c, h, meta=meta)
    ping = c.request(body={"jsonrpc": "2.0", "id": None, "method": "ping"}, headers=h)
    c.response(ping, body={"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}})
    note = c.request(body=req("notifications/initialized"), headers=h)
    c.response(note, 202)
    return c.close()


def _spans(c: Capture, findings: Any = None, **options: Any) -> list[ReadableSpan]:
    timeline = timeline_of(c)
    return timeline_spans(timeline, empty_findings() if findings is None else findings, **options)


def _named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_one_trace_per_session_with_exchanges_streams_and_incarnations() -> None:
    spans = _spans(_sessioned())
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    names = [s.name for s in spans]
    assert names[0] == "mcp session"
    assert sorted(names) == sorted(
        [
            "mcp session",
            "initialize",
            "tools/call pay",
            "SSE stream tools/call",
            "SSE incarnation 0",
            "GET /mcp",
            "SSE incarnation 1",
            "ping",
            "notifications/initialized",
        ]
    )
    root = spans[0]
    assert root.parent is None
    stream = _named(spans, "SSE stream tools/call")
    inc0, inc1 = _named(spans, "SSE incarnation 0"), _named(spans, "SSE incarnation 1")
    assert stream.parent is not None and root.context is not None
    assert stream.parent.span_id == root.context.span_id
    for inc in (inc0, inc1):
        assert inc.parent is not None and stream.context is not None
        assert inc.parent.span_id == stream.context.span_id
    assert inc0.start_time is not None and inc1.start_time is not None
    assert inc0.start_time == ms(4) and inc1.start_time > inc0.start_time
    assert stream.end_time is not None and inc1.end_time is not None
    assert stream.end_time >= inc1.end_time


def test_exchange_spans_carry_the_mcp_semconv_attributes() -> None:
    spans = _spans(_sessioned())
    call = _attrs(_named(spans, "tools/call pay"))
    assert call["mcp.method.name"] == "tools/call"
    assert call["jsonrpc.request.id"] == "2"
    assert call["gen_ai.tool.name"] == "pay"
    assert call["mcp.session.id"] == "s1"
    assert call["mcp.protocol.version"] == V
    assert call["server.address"] == "mcp.test" and call["server.port"] == 9000
    assert _named(spans, "tools/call pay").kind.name == "CLIENT"
    ping = _named(spans, "ping")
    assert "jsonrpc.request.id" not in _attrs(ping)  # a null id is no id
    assert _attrs(ping)["rpc.response.status_code"] == "-32600"
    assert ping.status.status_code is StatusCode.ERROR
    notification = _named(spans, "notifications/initialized")
    assert "jsonrpc.request.id" not in _attrs(notification)
    # No payload unless asked for.
    assert not any(k.startswith("gen_ai.tool.call.") for k in call)


def test_no_mcp_session_id_where_the_era_has_no_session() -> None:
    c = Capture().open()
    h = _initialize(c, None)  # a server without sessions (stateless_http)
    _resumed_call(c, h)
    spans = _spans(c.close())
    assert spans
    assert not [s.name for s in spans if "mcp.session.id" in _attrs(s)]
    assert _attrs(_named(spans, "tools/call pay"))["jsonrpc.request.id"] == "2"


def test_a_legacy_session_id_is_the_session_query_value() -> None:
    c = Capture().open()
    stream = c.request("GET", "/sse", headers={"accept": "text/event-stream"})
    c.response(stream, sse=True)
    c.chunk(stream, sse(event("/messages/?session_id=abc", event="endpoint")), n=0)
    init = req("initialize", 1, protocolVersion="2024-11-05", capabilities={})
    c.response(c.request("POST", "/messages/?session_id=abc", body=init), 202)
    c.chunk(stream, sse(event(res(1, protocolVersion="2024-11-05"))), n=1)
    c.end(stream, "client_closed")
    spans = _spans(c.close())
    exchanges = [s for s in spans if s.kind.name == "CLIENT"]
    assert [s.name for s in exchanges] == ["GET /sse", "initialize"]
    for span in [*exchanges, _named(spans, "mcp session")]:
        assert _attrs(span)["mcp.session.id"] == "abc"
        assert _attrs(span)["mcp.protocol.version"] == "2024-11-05"


def test_sse_events_are_span_events_of_their_incarnation() -> None:
    spans = _spans(_sessioned())
    inc0, inc1 = _named(spans, "SSE incarnation 0"), _named(spans, "SSE incarnation 1")
    first = [dict(e.attributes or {}) for e in inc0.events if e.name == SSE_EVENT]
    assert [(e["seamwatch.sse.event_id"], e["seamwatch.sse.priming"]) for e in first] == [
        ("p1", True),
        ("e1", False),
    ]
    assert first[0]["seamwatch.sse.retry_ms"] == 500
    assert "mcp.method.name" not in first[0]
    assert first[1]["mcp.method.name"] == "notifications/progress"
    (replayed,) = [dict(e.attributes or {}) for e in inc1.events]
    assert replayed["seamwatch.sse.event_id"] == "e2"
    assert replayed["jsonrpc.request.id"] == "2"
    assert [e.timestamp for e in inc0.events] == [ms(6), ms(7)]


@pytest.mark.parametrize("reverse", [False, True], ids=["frame-order", "reversed-rows"])
def test_events_of_one_chunk_keep_their_order_whatever_the_rows(reverse: bool) -> None:
    c = Capture().open()
    h = _initialize(c, "s1")
    call = c.request(body=req("tools/call", 2, name="pay", arguments={}), headers=h)
    c.response(call, sse=True, headers=h)
    c.chunk(
        call, sse(*(event(req("notifications/message", n=n), id=f"e{n}") for n in range(4))), n=0
    )
    c.end(call)
    timeline = timeline_of(c.close())
    if reverse:  # the frame's row order is unspecified (a group of sessions may hold another)
        timeline = dataclasses.replace(timeline, sse_events=timeline.sse_events.reverse())
    span = _named(timeline_spans(timeline, empty_findings()), "SSE incarnation 0")
    assert len({e.timestamp for e in span.events}) == 1  # one chunk: one time
    ids = [dict(e.attributes or {})["seamwatch.sse.event_id"] for e in span.events]
    assert ids == ["e0", "e1", "e2", "e3"]


def test_a_resume_links_to_the_incarnation_that_issued_its_cursor() -> None:
    spans = _spans(_sessioned())
    inc0, inc1 = _named(spans, "SSE incarnation 0"), _named(spans, "SSE incarnation 1")
    (link,) = inc1.links
    assert inc0.context is not None
    assert link.context.span_id == inc0.context.span_id
    assert link.context.trace_id == inc0.context.trace_id
    assert dict(link.attributes or {})["seamwatch.sse.cursor"] == "e1"
    assert not inc0.links


def test_a_cursor_from_another_session_links_into_that_sessions_trace() -> None:
    c = Capture().open()
    _resumed_call(c, _initialize(c, "s1"))
    h2 = _initialize(c, "s2")
    get = c.request("GET", headers={**h2, "last-event-id": "e1", "accept": "text/event-stream"})
    c.response(get, sse=True, headers=h2)
    c.chunk(get, sse(event(req("notifications/message", level="info", data="x"), id="z1")), n=0)
    c.end(get)
    spans = _spans(c.close())
    assert len({s.context.trace_id for s in spans if s.context}) == 2
    issuing = [
        s
        for s in spans
        if s.name == "SSE incarnation 0"
        and s.events[0].attributes
        and dict(s.events[0].attributes)["seamwatch.sse.event_id"] == "p1"
    ]
    (issued,) = issuing
    (stale,) = [s for s in spans if s.name == "SSE stream GET"]
    (answer,) = [
        s for s in spans if s.parent and stale.context and s.parent.span_id == stale.context.span_id
    ]
    (link,) = answer.links
    assert issued.context is not None and answer.context is not None
    assert link.context.trace_id == issued.context.trace_id != answer.context.trace_id
    assert dict(link.attributes or {})["seamwatch.cursor.status"] == "other_session"


@pytest.mark.parametrize(
    ("traceparent", "linked"),
    [
        (f"00-{TRACE}-{PARENT}-01", True),
        (f"00-{TRACE}-{PARENT}-00", True),  # not sampled is still a trace
        (f"00-{TRACE.upper()}-{PARENT}-01", False),  # W3C: lowercase hex only
        (f"00-{'0' * 32}-{PARENT}-01", False),  # all-zero trace id
        (f"ff-{TRACE}-{PARENT}-01", False),  # version ff is invalid
        (f"00-{TRACE}-{PARENT}", False),
        (17, False),
    ],
)
def test_a_request_carrying_traceparent_in_meta_links_to_that_trace(
    traceparent: object, linked: bool
) -> None:
    spans = _spans(_sessioned(meta={"traceparent": traceparent}))
    links = _named(spans, "tools/call pay").links
    if not linked:
        assert not links
        return
    (link,) = links
    assert f"{link.context.trace_id:032x}" == TRACE
    assert f"{link.context.span_id:016x}" == PARENT
    assert link.context.is_remote


def test_payloads_only_when_asked_and_as_captured() -> None:
    with_payloads = _spans(_sessioned(), payloads=True)
    call = _attrs(_named(with_payloads, "tools/call pay"))
    assert call["gen_ai.tool.call.arguments"] == '{"amount":5}'
    assert call["gen_ai.tool.call.result"] == '{"content":[{"text":"paid","type":"text"}]}'
    c = Capture().open()
    h = _initialize(c, "s1")
    call_flow = c.request(
        body=req("tools/call", 2, name="login", arguments={"password": "[redacted:1a2b3c4d]"}),
        headers=h,
    )
    c.response(call_flow, body=res(2, content=[]))
    spans = _spans(c.close(), payloads=True)
    arguments = _attrs(_named(spans, "tools/call login"))["gen_ai.tool.call.arguments"]
    assert arguments == '{"password":"[redacted:1a2b3c4d]"}'


def _finding(severity: str, **evidence: Any) -> dict[str, Any]:
    return {
        "detector": "causal-gap",
        "severity": severity,
        "session": "mcp:s1",
        "era": V,
        "title": f"a {severity} finding",
        "detail": "what happened",
        "first_ts": ms(9),
        "last_ts": ms(10),
        **evidence,
    }


@pytest.mark.parametrize(
    ("evidence", "span_name", "error"),
    [
        ({"flow_ids": ["f2", "f3"], "stream_ids": ["f2"]}, "tools/call pay", True),
        ({"flow_ids": ["unknown", "f3"]}, "GET /mcp", True),
        ({"stream_ids": ["f2"]}, "SSE stream tools/call", True),
        ({}, "mcp session", True),
    ],
)
def test_a_finding_is_an_event_on_its_first_evidence_span(
    evidence: dict[str, Any], span_name: str, error: bool
) -> None:
    findings = findings_frame([_finding("high", **evidence), _finding("low", **evidence)])
    spans = _spans(_sessioned(), findings)
    span = _named(spans, span_name)
    events = [dict(e.attributes or {}) for e in span.events if e.name == FINDING_EVENT]
    assert [e["seamwatch.severity"] for e in events] == ["high", "low"]
    assert events[0]["seamwatch.detector"] == "causal-gap"
    assert events[0]["seamwatch.finding.title"] == "a high finding"
    assert events[0]["seamwatch.fingerprint"] == findings["fingerprint"][0]
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "a high finding"
    others = [s for s in spans if s is not span]
    assert not [s for s in others if any(e.name == FINDING_EVENT for e in s.events)]


def test_a_low_finding_leaves_the_status_alone() -> None:
    findings = findings_frame([_finding("medium", flow_ids=["f2"])])
    span = _named(_spans(_sessioned(), findings), "tools/call pay")
    assert [e.name for e in span.events] == [FINDING_EVENT]
    assert span.status.status_code is StatusCode.UNSET


def test_a_finding_without_a_session_gets_a_trace_of_its_own() -> None:
    row = _finding("high")
    row["session"] = None
    spans = _spans(_sessioned(), findings_frame([row]))
    (own,) = [s for s in spans if s.name == "seamwatch capture"]
    assert [e.name for e in own.events] == [FINDING_EVENT]
    assert len({s.context.trace_id for s in spans if s.context}) == 2


def test_the_same_input_gives_the_same_ids() -> None:
    first = [(s.context, s.parent) for s in _spans(_sessioned())]
    again = [(s.context, s.parent) for s in _spans(_sessioned())]
    assert first == again
    other = Capture("run-2").open()
    _resumed_call(other, _initialize(other, "s1"))
    ids = {s.context.trace_id for s in _spans(other.close()) if s.context}
    assert ids.isdisjoint({c.trace_id for c, _ in first if c})  # another run, another trace


def test_batches_keep_a_trace_together() -> None:
    c = Capture().open()
    for n in range(3):
        _resumed_call(c, _initialize(c, f"s{n}"))
    spans = _spans(c.close())
    per_trace = len(spans) // 3
    parts = list(batches(spans, per_trace - 1))
    assert [len(p) for p in parts] == [per_trace] * 3
    for part in parts:
        assert len({s.context.trace_id for s in part if s.context}) == 1


def test_two_origins_sessions_keep_the_servers_own_session_id() -> None:
    c = Capture().open()
    for origin in ("http://127.0.0.1:9001", "http://127.0.0.1:9002"):
        f = c.request(body=req("initialize", 1, protocolVersion="2025-06-18"), origin=origin)
        c.response(f, body=res(1), headers={"Mcp-Session-Id": "1"})
    sessions = [s for s in _spans(c.close()) if s.name == "mcp session"]
    assert sorted(_attrs(s)["seamwatch.session.key"] for s in sessions) == [
        "mcp:1@http://127.0.0.1:9001",
        "mcp:1@http://127.0.0.1:9002",
    ]
    assert [_attrs(s)["mcp.session.id"] for s in sessions] == ["1", "1"]


def _lost_request(whole_event: bool) -> tuple[Capture, str]:
    """A session, then a flow of which only a chunk is left (its request line was lost)."""
    c = _sessioned()
    c.open()
    lost = c.request(body=req("tools/call", 9, name="pay", arguments={}))
    c.response(lost, sse=True)
    text = sse(event(res(9, content=[]), id="e9")) if whole_event else "id: e9\n"
    c.chunk(lost, text, n=1)
    c.records = [r for r in c.records if r.get("flow") != lost or r["kind"] == "chunk"]
    return c.close(), lost


@pytest.mark.parametrize("whole_event", [True, False])
def test_an_exchange_whose_request_was_lost_starts_at_the_first_time_known_of_it(
    whole_event: bool,
) -> None:
    """A torn capture: the exchange has no request time. With a whole SSE event it starts at
    that event's; with nothing timed left of it, it is not exported, and the rest is."""
    c, lost = _lost_request(whole_event)
    chunk_ts = next(r["ts_ns"] for r in c.records if r.get("flow") == lost)
    spans = _spans(c)
    orphans = [s for s in spans if (s.attributes or {}).get("seamwatch.flow_id") == lost]
    if whole_event:
        assert [s.start_time for s in orphans] == [chunk_ts]
    else:
        assert orphans == []
    assert {s.name for s in spans} >= {"mcp session", "initialize", "tools/call pay"}
