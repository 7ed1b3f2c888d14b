"""The JSON report of DESIGN.md §6 (analyzer/report/json.py)."""

from __future__ import annotations

import dataclasses
import io
import json

from analyzer.baseline import Baseline, BaselineEntry, apply_baseline
from analyzer.findings import FINDINGS_SCHEMA
from analyzer.report import Report
from analyzer.report import json as json_report
from tests.support.report_sample import ROWS, make_report


def test_shape_is_design_section_6(report: Report) -> None:
    got = json.loads(json_report.render(report))
    assert list(got) == ["schema", "findings", "summary", "inputs"]
    assert got["schema"] == 1
    assert list(got["summary"]) == [
        "by_detector",
        "by_severity",
        "sessions",
        "streams",
        "resumptions",
        "tool_calls",
    ]
    assert got["summary"]["by_detector"] == {
        "analysis-error": 0,
        "capture-health": 2,
        "causal-gap": 0,
        "duplicate-event-id": 2,
    }
    assert got["summary"]["by_severity"] == {"high": 1, "medium": 1, "low": 1, "info": 1}
    assert (got["summary"]["sessions"], got["summary"]["tool_calls"]) == (2, 0)
    assert got["inputs"] == [
        {
            "path": "captures/cap.jsonl",
            "records": 10,
            "skipped": 1,
            "warnings": ["1 torn last line(s) skipped"],
        },
        {"path": "/srv/b dump.har", "records": 4, "skipped": 0, "warnings": []},
    ]


def test_findings_have_every_field_in_schema_order(report: Report) -> None:
    findings = json.loads(json_report.render(report))["findings"]
    assert len(findings) == len(ROWS)
    for finding in findings:
        assert list(finding) == list(FINDINGS_SCHEMA)
    first = findings[0]
    assert first["severity"] == "high"
    assert first["flow_ids"] == ["f-get-2", "f-open"]
    assert first["first_ts"] == "2025-06-15T15:06:40.001500000Z"
    assert first["last_ts"] == "2025-06-15T15:06:49.000000123Z"
    assert findings[1]["request_ids"] == ['"abc"', "7"]
    assert findings[-1]["session"] is None and findings[-1]["first_ts"] is None
    assert [f["severity"] for f in findings] == ["high", "medium", "low", "info"]


def test_same_input_same_bytes() -> None:
    first = json_report.render(make_report())
    second = json_report.render(make_report(list(reversed(ROWS))))
    assert first == second
    assert first.endswith("}\n")
    assert first.isascii()


def test_write_matches_render(report: Report) -> None:
    out = io.StringIO()
    json_report.write(report, out)
    assert out.getvalue() == json_report.render(report)


def test_empty_report(empty_report: Report) -> None:
    got = json.loads(json_report.render(empty_report))
    assert got["findings"] == []
    assert set(got["summary"]["by_severity"].values()) == {0}
    assert set(got["summary"]["by_detector"].values()) == {0}


def test_a_baseline_marks_findings_and_lists_fixed(report: Report) -> None:
    first = report.findings.row(0, named=True)
    kept = BaselineEntry(first["fingerprint"], first["detector"], first["title"], "known")
    gone = BaselineEntry("f" * 16, "causal-gap", "gone", None)
    outcome = apply_baseline(report.findings, Baseline((kept, gone)), path="b.json")
    got = json.loads(json_report.render(report.with_baseline(outcome)))
    assert [f["baselined"] for f in got["findings"]] == [True, False, False, False]
    assert got["baseline"] == {
        "path": "b.json",
        "baselined": 1,
        "new": 3,
        "fixed": [
            {"fingerprint": "f" * 16, "detector": "causal-gap", "title": "gone", "reason": None}
        ],
    }
    assert "baseline" not in json.loads(json_report.render(report))
    assert "baselined" not in json.loads(json_report.render(report))["findings"][0]


def test_several_origins_name_each_findings_origin_and_count_sessions_per_origin(
    report: Report,
) -> None:
    """Only where the analysis reaches several origins: elsewhere neither key appears (above)."""
    origins = {"mcp:7f3c": "https://a.test:443", "legacy:abc": "http://127.0.0.1:9002"}
    got = json.loads(json_report.render(dataclasses.replace(report, origins=origins)))
    assert got["summary"]["origins"] == {"http://127.0.0.1:9002": 1, "https://a.test:443": 1}
    assert [(f["session"], f["origin"]) for f in got["findings"]] == [
        ("mcp:7f3c", "https://a.test:443"),
        ("mcp:7f3c", "https://a.test:443"),
        ("legacy:abc", "http://127.0.0.1:9002"),
        (None, None),
    ]
    assert list(got["findings"][0]) == [*FINDINGS_SCHEMA, "origin"]
