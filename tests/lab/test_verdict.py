"""lab.verdict: a scenario's findings judged against its expected.json, on hand-made findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analyzer.findings import Severity
from lab.framework import Expected
from lab.verdict import NOT_RESUMPTION, expected_text, judge

SCENARIOS = Path(__file__).resolve().parents[2] / "lab" / "scenarios"
CLEAN = Expected()
ROUND_ROBIN = Expected.load(SCENARIOS / "round_robin_replicas.expected.json")
MODERN_RETRY = Expected(required=["repeated-tool-call"], evidence={"request_ids": ["3", "4"]})


def finding(detector: str, severity: str = "medium", **evidence: list[str]) -> dict[str, Any]:
    return {"detector": detector, "severity": severity, **evidence}


ROUND_ROBIN_OK = [
    finding("duplicate-event-id", "high", event_ids=["e2"]),
    finding("cross-replica-resume", "high", event_ids=["e7"], flow_ids=["f5"]),
    finding("repeated-tool-call", "high", request_ids=["4", "5"]),
    finding("causal-gap", "high", event_ids=["e7"], request_ids=["4"]),
    finding("counter-reset", "medium", event_ids=["e7", "e1"]),  # allowed
    finding("capture-health", "info"),
]


@pytest.mark.parametrize(
    ("expected", "findings"),
    [
        pytest.param(CLEAN, [], id="clean, nothing found"),
        pytest.param(CLEAN, [finding("capture-health", "info")], id="clean, capture notes"),
        pytest.param(CLEAN, [finding("capture-health", "low")], id="clean, capture losses (low)"),
        pytest.param(ROUND_ROBIN, ROUND_ROBIN_OK, id="all required, any_of, allowed"),
        pytest.param(
            ROUND_ROBIN,
            [*ROUND_ROBIN_OK[:3], finding("phantom-resume", Severity.HIGH)],
            id="the other any_of member, Severity values",
        ),
        pytest.param(
            MODERN_RETRY,
            [finding("repeated-tool-call", "info", request_ids=["3", "4"])],
            id="a required detector counts at any severity",
        ),
        pytest.param(
            MODERN_RETRY,
            [
                finding("repeated-tool-call", "high", request_ids=["3"]),
                finding("repeated-tool-call", "medium", request_ids=["4", "9"]),
            ],
            id="evidence spread over two findings",
        ),
        pytest.param(
            MODERN_RETRY,
            [
                finding("repeated-tool-call", request_ids=["3", "4"]),
                finding("retry-violation", "low"),
            ],
            id="an unexpected low finding on a failure scenario",
        ),
    ],
)
def test_matches(expected: Expected, findings: list[dict[str, Any]]) -> None:
    verdict = judge(expected, findings)
    assert verdict.ok, verdict.problems()
    assert verdict.problems() == [] and verdict.text() == "ok"


def test_clean_scenario_fails_on_any_resumption_finding_at_any_severity() -> None:
    verdict = judge(CLEAN, [finding("causal-gap", "info"), finding("capture-health", "info")])
    assert not verdict.ok
    assert dict(verdict.unexpected) == {"causal-gap": Severity.INFO}
    assert verdict.problems() == ["unexpected causal-gap (info)"]


def test_resumption_means_every_detector_but_capture_notes_and_crashes() -> None:
    assert frozenset({"capture-health", "analysis-error"}) == NOT_RESUMPTION
    # A crashed detector is high: it fails any scenario through the medium rule.
    verdict = judge(CLEAN, [finding("analysis-error", "high")])
    assert dict(verdict.unexpected) == {"analysis-error": Severity.HIGH}
    assert not judge(MODERN_RETRY, [finding("analysis-error", "high")]).ok


def test_missing_required_any_of_and_evidence() -> None:
    findings = [
        finding("duplicate-event-id", "high", event_ids=["e2"]),
        finding("repeated-tool-call", "high", request_ids=["4"]),
        finding("counter-reset", "medium", event_ids=["e7"], request_ids=["5"]),  # allowed only
    ]
    registered = ["duplicate-event-id", "repeated-tool-call", "counter-reset", "causal-gap"]
    verdict = judge(ROUND_ROBIN, findings, registered=registered)
    assert verdict.missing == ("cross-replica-resume",)
    assert verdict.unmet_any_of == (("phantom-resume", "causal-gap"),)
    # e7 and 5 are cited only by an allowed detector: that does not count.
    assert dict(verdict.missing_evidence) == {"event_ids": ("e7",), "request_ids": ("5",)}
    assert verdict.problems() == [
        "missing cross-replica-resume (not implemented)",
        "none of phantom-resume or causal-gap",
        "event_ids not cited: e7",
        "request_ids not cited: 5",
    ]
    assert verdict.text().startswith("FAIL: missing cross-replica-resume (not implemented); ")
    assert verdict.unregistered == ("cross-replica-resume", "lost-response", "phantom-resume")
    unbuilt = judge(ROUND_ROBIN, findings, registered=["duplicate-event-id"])
    assert "none of phantom-resume or causal-gap (not implemented)" in unbuilt.problems()


def test_evidence_under_another_key_does_not_count() -> None:
    verdict = judge(MODERN_RETRY, [finding("repeated-tool-call", event_ids=["3", "4"])])
    assert dict(verdict.missing_evidence) == {"request_ids": ("3", "4")}


@pytest.mark.parametrize("severity", ["medium", "high"])
def test_unexpected_detector_at_medium_or_higher_fails(severity: str) -> None:
    findings = [
        finding("repeated-tool-call", "high", request_ids=["3", "4"]),
        finding("stale-cursor", "low"),
        finding("lost-response", severity),
        finding("lost-response", "info"),
    ]
    verdict = judge(MODERN_RETRY, findings)
    assert dict(verdict.unexpected) == {"lost-response": Severity(severity)}
    assert verdict.found["lost-response"] is Severity(severity)  # the worst one


def test_texts_for_the_demo_table() -> None:
    assert expected_text(CLEAN) == "nothing"
    assert expected_text(ROUND_ROBIN) == (
        "duplicate-event-id, cross-replica-resume, repeated-tool-call, "
        "phantom-resume or causal-gap (+counter-reset, lost-response)"
    )
    verdict = judge(ROUND_ROBIN, ROUND_ROBIN_OK)
    assert verdict.found_text() == (
        "causal-gap (high), counter-reset (medium), cross-replica-resume (high), "
        "duplicate-event-id (high), repeated-tool-call (high)"
    )  # capture-health notes are left out
    assert judge(CLEAN, [finding("capture-health", "info")]).found_text() == "nothing"
    expects_health = Expected(required=["capture-health"])
    shown = judge(expects_health, [finding("capture-health", "info")]).found_text()
    assert shown == "capture-health (info)"  # a scenario that expects the note shows it


def test_findings_from_the_json_report_shape() -> None:
    # `seamwatch analyze --format json` findings: every evidence list present, severity a name.
    row = {
        "detector": "repeated-tool-call",
        "severity": "high",
        "session": "client:127.0.0.1|app/1|",
        "flow_ids": ["a", "b"],
        "stream_ids": [],
        "event_ids": [],
        "request_ids": ["3", "4"],
        "fingerprint": "x",
    }
    assert judge(MODERN_RETRY, [row]).ok
