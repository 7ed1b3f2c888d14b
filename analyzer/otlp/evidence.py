"""Findings in the OTLP export: each a `seamwatch.finding` event on the span of its first
evidence (`SpanDrafts.evidence`), a high one setting that span's status to error; a finding no
span holds gets a root of its own (`CaptureRoots`). Also the order of the traces: the same for
a timeline exported whole and for sessions exported apart (the Spark engine)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from analyzer.otlp.draft import Attributes, DraftSpan, hash_id
from analyzer.otlp.frames import NO_SESSION

__all__ = [
    "FINDING_EVENT",
    "CaptureRoots",
    "Trace",
    "add_finding",
    "finding_rows",
    "trace_order",
]

FINDING_EVENT: Final = "seamwatch.finding"

#: A trace: its root and every span of it, in the order they are written.
Trace = tuple[DraftSpan, list[DraftSpan]]


def trace_order(trace: Trace) -> tuple[int, int]:
    """Where a trace goes in the export: by its root's start, then its root's span id."""
    root = trace[0]
    return root.start, root.span_id


def finding_rows(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """The findings in their order, as the rows `evidence` and `add_finding` read."""
    frame = findings.with_columns(
        pl.col("severity").cast(pl.String), pl.col("first_ts").dt.epoch("ns")
    )
    return frame.rows(named=True)


def add_finding(span: DraftSpan, finding: Mapping[str, Any]) -> None:
    """A finding as a `seamwatch.finding` event of `span`; a high one makes it an error."""
    attributes: Attributes = {
        "seamwatch.detector": finding["detector"],
        "seamwatch.severity": finding["severity"],
        "seamwatch.fingerprint": finding["fingerprint"],
        "seamwatch.finding.title": finding["title"],
        "seamwatch.finding.detail": finding["detail"],
    }
    for name in ("flow_ids", "stream_ids", "event_ids", "request_ids"):
        if finding[name]:
            attributes[f"seamwatch.finding.{name}"] = list(finding[name])
    stamp = finding["first_ts"] if finding["first_ts"] is not None else span.start
    span.events.append((FINDING_EVENT, attributes, stamp))
    if finding["severity"] == "high":
        span.error = finding["title"]


class CaptureRoots:
    """The roots of the findings no span of the timeline holds (one without a session, or of a
    session without exchanges): a trace a session, keyed by the session alone."""

    def __init__(self, earliest: int | None) -> None:
        # The earliest root so far: a finding without a time starts there.
        self.earliest = earliest
        self.roots: dict[str, DraftSpan] = {}

    def root(self, finding: Mapping[str, Any]) -> DraftSpan:
        session = finding["session"] or NO_SESSION
        if session not in self.roots:
            stamp = finding["first_ts"] or (self.earliest if self.earliest is not None else 0)
            trace_key = f"\x00{session}"
            root = DraftSpan(
                name="seamwatch capture",
                trace_id=hash_id(128, trace_key),
                span_id=hash_id(64, trace_key, "session", session),
                parent_id=None,
                start=stamp,
                end=stamp,
            )
            root.attributes["seamwatch.session.key"] = session
            self.roots[session] = root
            self.earliest = stamp if self.earliest is None else min(self.earliest, stamp)
        return self.roots[session]

    def traces(self) -> list[Trace]:
        return [(root, [root]) for root in self.roots.values()]
