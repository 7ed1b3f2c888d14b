"""OTLP/JSON encoding and OTLP/HTTP sending (analyzer/otlp/wire.py).

The JSON is read back with opentelemetry-proto's message classes (tests/support/otlp.py), and
the sending goes to a real OTLP/HTTP receiver on 127.0.0.1 that decodes each request with them.
"""

from __future__ import annotations

import json
import re

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from analyzer.findings import findings_frame
from analyzer.otlp import OtlpError
from analyzer.otlp.spans import timeline_spans
from analyzer.otlp.wire import (
    export_request,
    send,
    span_json,
    to_otlp_json,
    traces_url,
    write_otlp_json,
)
from tests.support.otlp import attributes, otlp_receiver, parse_otlp_json, spans_of
from tests.support.records import Capture, event, req, res, sse, timeline_of

pytestmark = pytest.mark.timeout(60)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _spans(sessions: int = 1) -> list[ReadableSpan]:
    c = Capture().open()
    for n in range(sessions):
        init = c.request(body=req("initialize", 1, protocolVersion="2025-11-25", capabilities={}))
        h = {"mcp-session-id": f"s{n}"}
        c.response(init, body=res(1, protocolVersion="2025-11-25"), headers=h)
        call = c.request(
            body=req("tools/call", 2, name="pay", arguments={}, _meta={"traceparent": TRACEPARENT}),
            headers=h,
        )
        c.response(call, sse=True, headers=h)
        c.chunk(call, "id: p1\nretry: 250\ndata: \n\n", n=0)
        c.chunk(call, sse(event(res(2, content=[]), id="e1")), n=1)
        c.end(call)
    finding = {
        "detector": "causal-gap",
        "severity": "high",
        "session": "mcp:s0",
        "title": "lost",
        "detail": "what happened",
        "flow_ids": ["f2"],
        "event_ids": ["p1", "e1"],
    }
    return timeline_spans(timeline_of(c.close()), findings_frame([finding]))


def test_otlp_json_is_the_protobuf_mapping_with_hex_ids() -> None:
    spans = _spans()
    text = to_otlp_json(spans)
    document = json.loads(text)
    (resource,) = document["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "seamwatch"
    raw = scope["spans"]
    assert len(raw) == len(spans)
    for span in raw:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"])
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
        assert isinstance(span["startTimeUnixNano"], str)  # 64-bit integers as strings
        assert isinstance(span["kind"], int)  # enums as integers
    (call,) = [s for s in raw if s["name"] == "tools/call pay"]
    (link,) = call["links"]
    assert link["traceId"] == "0af7651916cd43dd8448eb211c80319c"
    assert link["spanId"] == "b7ad6b7169203331"

    message = parse_otlp_json(text)
    # Field by field what OpenTelemetry's own encoder makes of the same spans: statuses, remote
    # links, flags, arrays, booleans and integers included.
    assert message == export_request(spans)
    parsed = spans_of(message)
    assert [s.name for s in parsed] == [s.name for s in spans]
    for got, built in zip(parsed, spans, strict=True):
        assert built.context is not None
        assert int.from_bytes(got.trace_id, "big") == built.context.trace_id
        assert int.from_bytes(got.span_id, "big") == built.context.span_id
        assert got.start_time_unix_nano == built.start_time
        assert got.end_time_unix_nano == built.end_time
    (priming,) = [
        e for s in parsed for e in s.events if attributes(e).get("seamwatch.sse.event_id") == "p1"
    ]
    assert attributes(priming)["seamwatch.sse.retry_ms"] == 250
    assert attributes(priming)["seamwatch.sse.priming"] is True


def test_the_same_spans_give_the_same_bytes() -> None:
    assert to_otlp_json(_spans()) == to_otlp_json(_spans())


@pytest.mark.parametrize("sessions", [0, 1, 3])
def test_a_document_written_span_by_span_is_the_same_bytes(sessions: int) -> None:
    spans = _spans(sessions)
    pieces: list[str] = []
    write_otlp_json((span_json(span) for span in spans), pieces.append)
    assert len(pieces) > 1 or not spans  # written a piece at a time
    assert "".join(pieces) == to_otlp_json(spans)
    assert len(spans_of(parse_otlp_json("".join(pieces)))) == len(spans)


def test_a_document_of_no_span_written_span_by_span() -> None:
    pieces: list[str] = []
    write_otlp_json([], pieces.append)
    assert "".join(pieces) == to_otlp_json([])


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector:4318/v1/traces", "http://collector:4318/v1/traces"),
        ("https://gw.example/otlp/traces", "https://gw.example/otlp/traces"),
    ],
)
def test_traces_url(endpoint: str, url: str) -> None:
    assert traces_url(endpoint) == url


def test_send_is_received_and_decoded_by_an_otlp_http_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=seamwatch-test")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    spans = _spans(sessions=3)
    with otlp_receiver() as receiver:
        sent = send(spans, receiver.url.removesuffix("/v1/traces"), batch_spans=4)
    assert not receiver.problems
    assert sent.requests == len(receiver.requests) == 3  # a session's trace is never split
    assert (sent.spans, sent.traces) == (len(spans), 3)
    for got in receiver.requests:
        assert got.headers["content-type"] == "application/x-protobuf"
        assert got.headers["content-encoding"] == "gzip"
        assert got.headers["x-tenant"] == "seamwatch-test"
        assert got.headers["user-agent"].startswith("OTel-OTLP-Exporter-Python")
    expected = spans_of(export_request(spans))
    assert receiver.spans == expected


def test_send_through_the_environments_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    spans = _spans()
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.removesuffix("/v1/traces"))
        send(spans, None)
    assert not receiver.problems
    assert len(receiver.spans) == len(spans)


def test_a_refusing_receiver_is_an_otlp_error() -> None:
    with otlp_receiver() as receiver:
        receiver.status = 400  # not retryable (OTLP/HTTP "Failures")
        with pytest.raises(OtlpError, match=r"did not accept .*400"):
            send(_spans(), receiver.url)


def test_an_unreachable_receiver_is_an_otlp_error_naming_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    with otlp_receiver() as receiver:
        url = receiver.url  # then nothing listens there any more
    with pytest.raises(OtlpError, match=r"did not accept .*(refused|Max retries)"):
        send(_spans(), url)
