"""A small hand-built report for the report writer tests (tests/report)."""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.detectors import DETECTORS, Detector
from analyzer.findings import Severity, finding_rows, findings_frame, finish_findings
from analyzer.report import InputSummary, Report

T0_NS = 1_750_000_000_000_000_000


def _nothing(timeline: Any, *, window_s: float = 120.0) -> pl.LazyFrame:
    return finding_rows([])


DUPLICATE = Detector(
    "duplicate-event-id",
    Severity.HIGH,
    "One event id issued twice in a session with different payloads.\n\n"
    "Must not flag exact replays.",
    _nothing,
)
GAP = Detector("causal-gap", Severity.HIGH, "Messages lost at the end of a chain.", _nothing)
BUILTIN = tuple(
    sorted(
        (d for d in DETECTORS if d.id in ("analysis-error", "capture-health")), key=lambda d: d.id
    )
)
RAN = tuple(sorted((*BUILTIN, DUPLICATE, GAP), key=lambda d: d.id))

ROWS: list[dict[str, object]] = [
    {
        "detector": "duplicate-event-id",
        "severity": "high",
        "session": "mcp:7f3c",
        "era": "2025-06-18",
        "title": "event id 17 issued twice with different payloads",
        "detail": "Replica b re-issued id 17 on stream f-open.\nUse session-global event ids.",
        "flow_ids": ["f-get-2", "f-open"],
        "stream_ids": ["f-open"],
        "event_ids": ["17"],
        "first_ts": T0_NS + 1_500_000,
        "last_ts": T0_NS + 9_000_000_123,
    },
    {
        "detector": "duplicate-event-id",
        "severity": "medium",
        "session": "mcp:7f3c",
        "era": "2025-06-18",
        "title": "event id 18 replayed by another replica",
        "detail": 'Ünïcödé détail with <xml> & "quotes" and a control \x01 char',
        "flow_ids": ["f-get-3"],
        "event_ids": ["18"],
        "request_ids": ['"abc"', "7"],
        "first_ts": T0_NS + 2_000_000,
        "last_ts": T0_NS + 2_000_000,
    },
    {
        "detector": "capture-health",
        "severity": "info",
        "title": "cap.jsonl: 1 torn last line(s) skipped",
        "detail": "captures/cap.jsonl: 10 records read, 1 skipped.",
        "fingerprint_extra": ["cap.jsonl", "torn_line"],
    },
    {
        "detector": "capture-health",
        "severity": "low",
        "session": "legacy:abc",
        "title": "2 responses open at capture end",
        "detail": "not judged",
        "flow_ids": ["f-b1"],
        "first_ts": T0_NS,
    },
]


def make_report(
    rows: list[dict[str, object]] | None = None, *, fail_on: Severity | None = Severity.MEDIUM
) -> Report:
    return Report(
        findings=finish_findings(findings_frame(ROWS if rows is None else rows)),
        detectors=RAN,
        inputs=(
            InputSummary("captures/cap.jsonl", 10, 1, ("1 torn last line(s) skipped",)),
            InputSummary("/srv/b dump.har", 4, 0),
        ),
        sessions=2,
        streams=3,
        resumptions=1,
        tool_calls=0,
        fail_on=fail_on,
        flow_inputs={"f-b1": 1, "f-open": 0, "f-get-2": 0, "f-get-3": 0},
    )
