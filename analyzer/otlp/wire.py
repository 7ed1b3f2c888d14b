"""The spans on the wire: an OTLP/JSON `ExportTraceServiceRequest`, or OTLP/HTTP to a receiver.

OTLP/JSON is protobuf's JSON mapping with the OTLP specification's differences ("OTLP/HTTP",
JSON Protobuf Encoding): trace and span ids as hex strings, not base64; enums as integers;
lowerCamelCase keys; 64-bit integers as decimal strings (as the mapping already has them).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext

from analyzer.otlp import OtlpError
from analyzer.otlp.draft import RESOURCE, SCOPE
from analyzer.otlp.spans import batches

__all__ = [
    "BATCH_SPANS",
    "TRACES_PATH",
    "Sent",
    "export_request",
    "send",
    "span_json",
    "to_otlp_json",
    "traces_url",
    "write_otlp_json",
]

#: Spans per OTLP/HTTP request (a session's spans stay together unless it alone has more).
BATCH_SPANS: Final = 512
#: Where an OTLP/HTTP receiver takes traces (OTLP specification, "OTLP/HTTP Request").
TRACES_PATH: Final = "/v1/traces"


def export_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """The spans as one OTLP request message (grouped by resource and scope)."""
    request: ExportTraceServiceRequest = encode_spans(spans)
    return request


def to_otlp_json(spans: Iterable[ReadableSpan]) -> str:
    """The spans as one OTLP/JSON `ExportTraceServiceRequest`, one line and a newline.

    Written straight from the spans rather than through `json_format.MessageToDict` of
    `export_request(spans)`, which walks the message in Python and costs several times the
    analysis; the tests parse the text back with opentelemetry-proto and compare it with
    `export_request` field by field.
    """
    # Each span becomes text at once, so only the text of the whole request is held, not a
    # tree of dicts for every attribute of every event.
    resources: dict[int, tuple[Resource, dict[int, tuple[InstrumentationScope, list[str]]]]] = {}
    for span in spans:
        _, scopes = resources.setdefault(id(span.resource), (span.resource, {}))
        scope = span.instrumentation_scope or _NO_SCOPE
        scopes.setdefault(id(scope), (scope, []))[1].append(_dumps(_span_object(span)))
    resource_texts = []
    for resource, scopes in resources.values():
        scope_texts = [
            f'{{"scope":{_dumps(_scope_object(scope))},"spans":[{",".join(texts)}]}}'
            for scope, texts in scopes.values()
        ]
        resource_texts.append(
            f'{{"resource":{_dumps(_attributes_object(resource.attributes))},'
            f'"scopeSpans":[{",".join(scope_texts)}]}}'
        )
    return f'{{"resourceSpans":[{",".join(resource_texts)}]}}\n'


def span_json(span: ReadableSpan) -> str:
    """One span as the text `to_otlp_json` writes for it."""
    return _dumps(_span_object(span))


def write_otlp_json(
    span_texts: Iterable[str],
    write: Callable[[str], object],
    *,
    resource: Resource = RESOURCE,
    scope: InstrumentationScope = SCOPE,
) -> None:
    """`to_otlp_json` of spans of one resource and scope, given as their `span_json` texts,
    written a piece at a time: the document is never held whole (the Spark engine's export,
    whose spans arrive from the executors in order)."""
    texts = iter(span_texts)
    first = next(texts, None)
    if first is None:
        write('{"resourceSpans":[]}\n')
        return
    write(
        f'{{"resourceSpans":[{{"resource":{_dumps(_attributes_object(resource.attributes))},'
        f'"scopeSpans":[{{"scope":{_dumps(_scope_object(scope))},"spans":['
    )
    write(first)
    for text in texts:
        write(",")
        write(text)
    write("]}]}]}\n")


def _dumps(value: object) -> str:
    # ensure_ascii: attribute text from payloads may hold lone surrogates (no UTF-8 form).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


_NO_SCOPE: Final = InstrumentationScope("")


def _span_object(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None  # every span of `analyzer.otlp.spans` has one
    item: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
    }
    if span.parent is not None:
        item["parentSpanId"] = f"{span.parent.span_id:016x}"
    # Span.SpanKind in trace.proto counts from UNSPECIFIED = 0; the SDK's from INTERNAL = 0.
    item.update(
        name=span.name,
        kind=span.kind.value + 1,
        startTimeUnixNano=str(span.start_time),
        endTimeUnixNano=str(span.end_time),
    )
    item.update(_attributes_object(span.attributes))
    if span.events:
        item["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, **_attributes_object(e.attributes)}
            for e in span.events
        ]
    if span.links:
        item["links"] = [
            {
                "traceId": f"{link.context.trace_id:032x}",
                "spanId": f"{link.context.span_id:016x}",
                **_attributes_object(link.attributes),
                "flags": _flags(link.context),
            }
            for link in span.links
        ]
    status: dict[str, Any] = {}
    if span.status.description:
        status["message"] = span.status.description
    if span.status.status_code.value:
        status["code"] = span.status.status_code.value
    item["status"] = status
    item["flags"] = _flags(span.parent)
    return item


def _flags(parent: SpanContext | None) -> int:
    """Span.flags: whether the parent (or linked) context is remote is known, and if so."""
    flags = int(SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
    if parent is not None and parent.is_remote:
        flags |= SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
    return flags


def _scope_object(scope: InstrumentationScope) -> dict[str, Any]:
    item: dict[str, Any] = {"name": scope.name}
    if scope.version:
        item["version"] = scope.version
    return item


def _attributes_object(attributes: Any) -> dict[str, Any]:
    """`{"attributes": [KeyValue...]}`, or nothing when there are none (proto3 JSON omits it)."""
    if not attributes:
        return {}
    return {"attributes": [{"key": k, "value": _any_value(v)} for k, v in attributes.items()]}


def _any_value(value: Any) -> dict[str, Any]:
    # bool before int: a bool is an int in Python.
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64: a decimal string in the JSON mapping
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def traces_url(endpoint: str) -> str:
    """The traces URL of `--otlp-endpoint`: a bare origin gets `/v1/traces` as
    OTEL_EXPORTER_OTLP_ENDPOINT does; a URL with a path is used as given, as
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is."""
    scheme, sep, rest = endpoint.partition("://")
    if sep and "/" not in rest.rstrip("/"):
        return f"{scheme}://{rest.rstrip('/')}{TRACES_PATH}"
    return endpoint


@dataclass(frozen=True)
class Sent:
    """What an export sent: requests accepted, spans and traces in them."""

    requests: int
    spans: int
    traces: int


def send(
    spans: Iterable[ReadableSpan], endpoint: str | None, *, batch_spans: int = BATCH_SPANS
) -> Sent:
    """Send the spans over OTLP/HTTP (protobuf) through OpenTelemetry's exporter. The exporter
    honours the `OTEL_EXPORTER_OTLP_*` variables (headers, timeout, compression, certificates;
    the endpoint when `endpoint` is None). OtlpError, with the exporter's last complaints, when
    a request is not accepted."""
    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint) if endpoint else None)
    requests = count = 0
    traces: set[int] = set()
    with _complaints() as complaints:
        try:
            for batch in batches(spans, batch_spans):
                if exporter.export(batch) is not SpanExportResult.SUCCESS:
                    where = traces_url(endpoint) if endpoint else "OTEL_EXPORTER_OTLP_*'s endpoint"
                    # The last two: a retry's cause, then the exporter's giving up.
                    last = "; ".join(complaints[-2:]) or "no reason given"
                    raise OtlpError(
                        f"the OTLP receiver at {where} did not accept {len(batch)} spans "
                        f"(after {requests} accepted requests): {last}"
                    )
                requests += 1
                count += len(batch)
                traces.update(span.context.trace_id for span in batch if span.context)
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]  # closes its HTTP session
    return Sent(requests=requests, spans=count, traces=len(traces))


class _Complaints(logging.Handler):
    """Keeps the exporter's warnings (one line each, cut) instead of printing them."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().strip().splitlines()
        self.lines.append(text[0][:_COMPLAINT_CHARS] if text else record.levelname)


_COMPLAINT_CHARS: Final = 240


@contextlib.contextmanager
def _complaints() -> Iterator[list[str]]:
    """The exporter logs each retry and failure as a warning; the user gets one line from
    `seamwatch export` instead, carrying the last of them."""
    logger = logging.getLogger("opentelemetry.exporter.otlp")
    lines: list[str] = []
    handler = _Complaints(lines)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
