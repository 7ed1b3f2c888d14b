"""The spans on the wire: an OTLP/JSON `ExportTraceServiceRequest`, or OTLP/HTTP to a receiver.

OTLP/JSON is protobuf's JSON mapping with the OTLP specification's differences ("OTLP/HTTP",
JSON Protobuf Encoding): trace and span ids as hex strings, not base64; enums as integers;
lowerCamelCase keys; 64-bit integers as decimal strings (as the mapping already has them).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Final

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from analyzer.otlp import OtlpError
from analyzer.otlp.spans import batches

__all__ = ["BATCH_SPANS", "TRACES_PATH", "export_request", "send", "to_otlp_json", "traces_url"]

#: Spans per OTLP/HTTP request (a session's spans stay together unless it alone has more).
BATCH_SPANS: Final = 512
#: Where an OTLP/HTTP receiver takes traces (OTLP specification, "OTLP/HTTP Request").
TRACES_PATH: Final = "/v1/traces"

# The fields of bytes type holding ids, in spans and in their links.
_ID_FIELDS: Final = ("traceId", "spanId", "parentSpanId")


def export_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """The spans as one OTLP request message (grouped by resource and scope)."""
    request: ExportTraceServiceRequest = encode_spans(spans)
    return request


def to_otlp_json(request: ExportTraceServiceRequest) -> str:
    """The request in OTLP/JSON, one line and a newline."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    # ensure_ascii: attribute text from payloads may hold lone surrogates (no UTF-8 form).
    return json.dumps(document, separators=(",", ":"), ensure_ascii=True) + "\n"


def _hex_ids(item: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        if name in item:
            item[name] = base64.b64decode(item[name]).hex()


def traces_url(endpoint: str) -> str:
    """The traces URL of `--otlp-endpoint`: a bare origin gets `/v1/traces` as
    OTEL_EXPORTER_OTLP_ENDPOINT does; a URL with a path is used as given, as
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is."""
    scheme, sep, rest = endpoint.partition("://")
    if sep and "/" not in rest.rstrip("/"):
        return f"{scheme}://{rest.rstrip('/')}{TRACES_PATH}"
    return endpoint


def send(
    spans: Sequence[ReadableSpan], endpoint: str | None, *, batch_spans: int = BATCH_SPANS
) -> int:
    """Send the spans over OTLP/HTTP (protobuf) through OpenTelemetry's exporter; the number of
    requests sent. The exporter honours the `OTEL_EXPORTER_OTLP_*` variables (headers,
    timeout, compression, certificates; the endpoint when `endpoint` is None). OtlpError, with
    the exporter's last complaints, when a request is not accepted."""
    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint) if endpoint else None)
    sent = 0
    with _complaints() as complaints:
        try:
            for batch in batches(spans, batch_spans):
                if exporter.export(batch) is not SpanExportResult.SUCCESS:
                    where = traces_url(endpoint) if endpoint else "OTEL_EXPORTER_OTLP_*'s endpoint"
                    # The last two: a retry's cause, then the exporter's giving up.
                    last = "; ".join(complaints[-2:]) or "no reason given"
                    raise OtlpError(
                        f"the OTLP receiver at {where} did not accept {len(batch)} spans "
                        f"(after {sent} accepted requests): {last}"
                    )
                sent += 1
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]  # closes its HTTP session
    return sent


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
