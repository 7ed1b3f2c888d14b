"""OTLP for tests: an OTLP/JSON reader and an OTLP/HTTP trace receiver on 127.0.0.1.

`parse_otlp_json` reads a file with opentelemetry-proto's message classes and protobuf's JSON
mapping, after turning the hex ids OTLP/JSON has back into the base64 the mapping expects (the
one difference the OTLP specification makes for ids).

The receiver does what a Collector's otlp receiver does with a request, minus the pipeline.
Every request is checked against the OTLP/HTTP specification (POST to /v1/traces,
`Content-Type: application/x-protobuf`, an optional gzip `Content-Encoding`) and decoded with
opentelemetry-proto's own `ExportTraceServiceRequest` message class; nothing is hand-parsed.
It answers as the specification asks: 200 with an `ExportTraceServiceResponse` in protobuf, or
`status` when a test sets one (to play a refusing Collector).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def parse_otlp_json(text: str) -> ExportTraceServiceRequest:
    """An OTLP/JSON trace request as the message it encodes (ValueError/ParseError if it is not)."""
    document = json.loads(text)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for item in [span, *span.get("links", [])]:
                    for name in ("traceId", "spanId", "parentSpanId"):
                        if name in item:
                            raw = bytes.fromhex(item[name])
                            item[name] = base64.b64encode(raw).decode("ascii")
    message = ExportTraceServiceRequest()
    json_format.ParseDict(document, message)
    return message


def spans_of(message: ExportTraceServiceRequest) -> list[Span]:
    """Every span of a request, in order."""
    return [
        span
        for resource in message.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def attributes(item: Any) -> dict[str, Any]:
    """A span's, event's or link's attributes as plain values (arrays as lists)."""
    return {kv.key: _value(kv.value) for kv in item.attributes}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which)


@dataclass
class Received:
    """One request as it came: headers (lower-case names) and the decoded message."""

    path: str
    headers: dict[str, str]
    message: ExportTraceServiceRequest


@dataclass
class Receiver:
    """The running receiver: its traces URL and what it got."""

    url: str
    requests: list[Received] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    status: int = 200

    @property
    def spans(self) -> list[Span]:
        """Every span of every request, in order."""
        return [span for got in self.requests for span in spans_of(got.message)]


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serve on an ephemeral 127.0.0.1 port until the block ends."""
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = self.rfile.read(int(headers.get("content-length", "0")))
            if self.path != "/v1/traces":
                receiver.problems.append(f"path {self.path}")
            if headers.get("content-type") != "application/x-protobuf":
                receiver.problems.append(f"content-type {headers.get('content-type')}")
            if headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            message = ExportTraceServiceRequest.FromString(body)
            receiver.requests.append(Received(self.path, headers, message))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(receiver.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
