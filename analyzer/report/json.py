"""The JSON report of DESIGN.md §6: one object, the same bytes for the same input.

`{"schema": 1, "findings": [...], "summary": {"by_detector": {...}, "by_severity": {...},
"sessions": N, "streams": N, "resumptions": N, "tool_calls": N}, "inputs": [{"path": ...,
"records": N, "skipped": N, "warnings": [...]}]}`. Keys keep the documented order, findings'
fields the findings schema's order; `by_detector` is in id order, `by_severity` worst first, and
both list every detector that ran and every level, zeros included. No time of the run appears.

Where the analysis reaches several origins (a forward proxy's capture of a client of several
servers), each finding also names its session's `"origin"` (`scheme://host:port`; null for a
finding without a session) and the summary counts `"origins"`: sessions per origin. Elsewhere
neither key appears, so a reverse proxy's capture reports the same bytes as before origins were
known.

With `--baseline`, each finding also says whether the baseline accepted it (`"baselined"`), and
a last key `"baseline"` gives the file, the counts and the entries no finding matched any more
(`"fixed"`: prune them).
"""

from __future__ import annotations

import json
from typing import Final, TextIO

from analyzer.report import Report, finding_records, summary_counts

__all__ = ["SCHEMA", "render", "to_object", "write"]

#: Version of this report's shape; bumped when a consumer would have to change.
SCHEMA: Final = 1


def to_object(report: Report) -> dict[str, object]:
    """The report as plain JSON values."""
    summary: dict[str, object] = {
        "by_detector": report.counts_by_detector(),
        "by_severity": {sev.value: n for sev, n in report.counts_by_severity().items()},
    }
    summary.update(summary_counts(report))
    findings = finding_records(report.findings)
    if report.origins:
        summary["origins"] = report.sessions_by_origin()
        for finding in findings:
            finding["origin"] = report.finding_origin(finding["session"])
    if report.baseline is not None:
        for finding in findings:
            finding["baselined"] = report.is_baselined(str(finding["fingerprint"]))
    document: dict[str, object] = {
        "schema": SCHEMA,
        "findings": findings,
        "summary": summary,
        "inputs": [
            {
                "path": item.path,
                "records": item.records,
                "skipped": item.skipped,
                "warnings": list(item.warnings),
            }
            for item in report.inputs
        ],
    }
    if report.baseline is not None:
        document["baseline"] = {
            "path": report.baseline.path,
            "baselined": report.baseline.baselined.height,
            "new": report.baseline.new.height,
            "fixed": [
                {
                    "fingerprint": e.fingerprint,
                    "detector": e.detector,
                    "title": e.title,
                    "reason": e.reason,
                }
                for e in report.baseline.fixed
            ],
        }
    return document


def render(report: Report) -> str:
    """The report as JSON text, ending with a newline."""
    # ensure_ascii: payload-derived text may hold lone surrogates, which have no UTF-8 form.
    return json.dumps(to_object(report), indent=2, ensure_ascii=True) + "\n"


def write(report: Report, out: TextIO) -> None:
    """Write the JSON report to a text stream."""
    out.write(render(report))
