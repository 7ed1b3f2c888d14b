"""The JUnit XML report (analyzer/report/junit.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from analyzer.baseline import Baseline, BaselineEntry, apply_baseline
from analyzer.findings import Severity
from analyzer.report import Report
from analyzer.report import junit as junit_report
from tests.support.report_sample import ROWS, make_report


def cases(text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    return {case.get("name", ""): case for case in suite.findall("testcase")}


def test_one_test_case_per_detector_that_ran(report: Report) -> None:
    text = junit_report.render(report)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')
    got = cases(text)
    assert sorted(got) == sorted(det.id for det in report.detectors)
    root = ET.fromstring(text)
    assert root.get("tests") == str(len(report.detectors))
    assert root.get("failures") == "1"


def test_failed_when_findings_at_or_above_fail_on(report: Report) -> None:
    got = cases(junit_report.render(report))
    failure = got["duplicate-event-id"].find("failure")
    assert failure is not None
    assert failure.get("type") == "high"
    message = failure.get("message", "")
    assert message.startswith("2 finding(s) at or above medium: event id 17 issued twice")
    assert "event id 18 replayed by another replica" in message
    assert "session: mcp:7f3c" in (failure.text or "")
    # below the threshold: listed, not failed
    health = got["capture-health"]
    assert health.find("failure") is None
    out = health.find("system-out")
    assert out is not None and "2 responses open at capture end" in (out.text or "")
    assert got["causal-gap"].find("failure") is None
    assert list(got["causal-gap"]) == []


@pytest.mark.parametrize(
    ("fail_on", "failing"),
    [
        (Severity.HIGH, {"duplicate-event-id"}),
        (Severity.LOW, {"duplicate-event-id", "capture-health"}),
        (Severity.INFO, {"duplicate-event-id", "capture-health"}),
        (None, set()),
    ],
)
def test_fail_on_threshold(fail_on: Severity | None, failing: set[str]) -> None:
    got = cases(junit_report.render(make_report(fail_on=fail_on)))
    assert {name for name, case in got.items() if case.find("failure") is not None} == failing


def test_text_is_valid_xml_whatever_the_detail_holds(report: Report) -> None:
    text = junit_report.render(report)
    ET.fromstring(text)  # the \x01 in a detail must not make it invalid
    assert "\x01" not in text
    assert "Ünïcödé" in text


def test_same_input_same_bytes() -> None:
    assert junit_report.render(make_report()) == junit_report.render(
        make_report(list(reversed(ROWS)))
    )


def test_no_time_or_host_attributes(report: Report) -> None:
    text = junit_report.render(report)
    for attribute in ("time=", "timestamp=", "hostname="):
        assert attribute not in text


def test_baselined_findings_are_listed_never_failed(report: Report) -> None:
    first = report.findings.row(0, named=True)  # duplicate-event-id, high
    entry = BaselineEntry(first["fingerprint"], first["detector"], first["title"])
    outcome = apply_baseline(report.findings, Baseline((entry,)), path="b.json")
    got = cases(junit_report.render(report.with_baseline(outcome)))
    case = got["duplicate-event-id"]
    failure = case.find("failure")
    assert failure is not None  # the medium one is not in the baseline
    assert failure.get("message", "").startswith("1 finding(s) at or above medium: event id 18")
    out = case.find("system-out")
    assert out is not None
    assert (out.text or "").startswith("[high] (baselined) event id 17 issued twice")
