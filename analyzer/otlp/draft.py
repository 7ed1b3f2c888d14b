"""A span of the OTLP export while it is assembled, and the ids and contexts of spans.

Ids are hashes of the capture run, session and flow ids: the same input gives the same trace.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from analyzer import __version__

__all__ = ["RESOURCE", "SCOPE", "Attributes", "DraftSpan", "hash_id", "span_context"]

#: The scope and resource of every span of the export.
SCOPE: Final = InstrumentationScope("seamwatch", __version__)
RESOURCE: Final = Resource({"service.name": "seamwatch", "service.version": __version__})

Attributes = dict[str, Any]


@dataclass
class DraftSpan:
    """A span being assembled; frozen into a ReadableSpan at the end."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: int
    end: int
    depth: int = 0  # 0 for a session's root, 1 under it, 2 for an incarnation
    kind: SpanKind = SpanKind.INTERNAL
    attributes: Attributes = field(default_factory=dict)
    # (name, attributes, time): SDK Events are made when the span is frozen, so only the
    # spans being written are held as SDK objects.
    events: list[tuple[str, Attributes, int]] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    error: str | None = None

    def context(self) -> SpanContext:
        return span_context(self.trace_id, self.span_id)

    def freeze(self) -> ReadableSpan:
        parent = None if self.parent_id is None else span_context(self.trace_id, self.parent_id)
        status = (
            Status(StatusCode.UNSET) if self.error is None else Status(StatusCode.ERROR, self.error)
        )
        events = [
            Event(name, attributes, stamp, limit=None)
            for name, attributes, stamp in sorted(self.events, key=lambda e: e[2])
        ]
        return ReadableSpan(
            name=self.name,
            context=self.context(),
            parent=parent,
            resource=RESOURCE,
            attributes=self.attributes,
            events=events,
            links=self.links,
            kind=self.kind,
            status=status,
            start_time=self.start,
            end_time=max(self.end, self.start),
            instrumentation_scope=SCOPE,
        )


def span_context(trace_id: int, span_id: int, *, remote: bool = False) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=remote, trace_flags=TraceFlags(1))


def hash_id(bits: int, *parts: str) -> int:
    """A non-zero id of `bits` bits from the parts (ids must not be all zero: W3C trace context)."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1
