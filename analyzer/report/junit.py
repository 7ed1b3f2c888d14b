"""The JUnit XML report: one test case per detector that ran (DESIGN.md §6).

A test case fails when its detector has findings at or above `--fail-on`; the failure message
counts them and its text lists them. The detector's findings below `--fail-on`, and those a
`--baseline` accepted (marked so), are listed in the test case's `system-out`, so CI shows the
context too. No times or host names are written,
so the same input gives the same bytes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Final, TextIO

import polars as pl

from analyzer.findings import Severity
from analyzer.report import Report, at_or_above, iso_ts

__all__ = ["render", "write"]

SUITE: Final = "seamwatch analyze"
CLASSNAME: Final = "seamwatch.detectors"

# XML 1.0 §2.2 Char: no C0 controls but tab, LF, CR; no surrogates; no U+FFFE, U+FFFF.
_NOT_XML_CHAR: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render(report: Report) -> str:
    """The report as JUnit XML text, ending with a newline."""
    failing = at_or_above(report.new_findings, report.fail_on)
    threshold = report.fail_on.value if report.fail_on is not None else "none"
    failures = 0
    cases: list[ET.Element] = []
    for det in report.detectors:
        mine = report.findings.filter(pl.col("detector") == det.id)
        bad = failing.filter(pl.col("detector") == det.id)
        case = ET.Element("testcase", {"classname": CLASSNAME, "name": det.id})
        if bad.height:
            failures += 1
            worst = Severity(bad["severity"][0])
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "message": _clean(
                        f"{bad.height} finding(s) at or above {threshold}: "
                        + "; ".join(bad["title"].to_list())
                    ),
                    "type": worst.value,
                },
            )
            failure.text = _clean(_listing(bad, report))
        rest = mine.filter(~pl.col("fingerprint").is_in(bad["fingerprint"].implode()))
        if rest.height:
            out = ET.SubElement(case, "system-out")
            out.text = _clean(_listing(rest, report))
        cases.append(case)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": "seamwatch", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts, "skipped": "0"})
    suite.extend(cases)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def write(report: Report, out: TextIO) -> None:
    """Write the JUnit report to a text stream."""
    out.write(render(report))


def _listing(findings: pl.DataFrame, report: Report) -> str:
    """One paragraph per finding: severity, title, session, time, evidence, detail."""
    blocks = []
    for row in findings.with_columns(pl.col("first_ts").dt.epoch("ns")).iter_rows(named=True):
        mark = " (baselined)" if report.is_baselined(row["fingerprint"]) else ""
        lines = [f"[{row['severity']}]{mark} {row['title']}"]
        if row["session"] is not None:
            lines.append(f"  session: {row['session']}")
        if row["first_ts"] is not None:
            lines.append(f"  first seen: {iso_ts(row['first_ts'])}")
        for name in ("stream_ids", "event_ids", "request_ids", "flow_ids"):
            if row[name]:
                lines.append(f"  {name}: {', '.join(row[name])}")
        lines.extend(f"  {line}" for line in row["detail"].splitlines())
        lines.append(f"  fingerprint: {row['fingerprint']}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _clean(text: str) -> str:
    """Text with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML_CHAR.sub("\ufffd", text)
