"""fresh-resume: a standalone GET stream's resume answered 200 with a fresh stream, no replay."""

from __future__ import annotations

from typing import Any

import pytest

from lab.scenarios.fresh_resume import ALERT
from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("fresh-resume")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def _gets(run: LabRun) -> tuple[Flow, Flow]:
    first, resume = [f for f in run.flows if f.method == "GET"]
    return first, resume


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["phantom-resume"]
    assert run.expected["allowed"] == ["causal-gap"]
    ids = [run.notes["cursor"], run.notes["unhandled_event_id"], *run.notes["resume_event_ids"]]
    assert run.expected["evidence"] == {"event_ids": ids}
    assert {f.response_header("x-served-by") for f in run.flows} == {"fresh-resume"}


def test_the_standalone_stream_carried_the_alert_after_the_cursor(run: LabRun) -> None:
    first, _ = _gets(run)
    assert first.request_header("last-event-id") is None and first.status == 200
    assert [e.id for e in first.events] == run.notes["get_event_ids"] == ["e1", "e2", "e3"]
    assert first.events[0].data == ""  # priming
    opened, alert = first.messages
    assert opened["method"] == alert["method"] == "notifications/message"
    assert alert["params"]["data"] == ALERT
    assert first.end is not None and first.end["how"] == "client_closed"


def test_the_resume_is_answered_with_a_fresh_stream(run: LabRun) -> None:
    _, resume = _gets(run)
    assert resume.request_header("last-event-id") == run.notes["cursor"] == "e2"
    assert resume.status == 200
    assert [e.id for e in resume.events] == run.notes["resume_event_ids"] == ["e4", "e5"]
    assert resume.events[0].data == ""  # a new priming event
    (fresh,) = resume.messages
    assert fresh["method"] == "notifications/message"
    assert fresh["params"]["data"] == {"replica": "fresh-resume", "stream": "standalone"}
    assert all(m["params"]["data"] != ALERT for m in resume.messages)  # e3 never came again
    assert not any("error" in m for m in resume.messages)  # nothing said the cursor failed
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200


def test_phantom_resume_flags_the_resume(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "phantom-resume")
    first, resume = _gets(run)
    assert found["severity"] == "high"
    assert found["event_ids"] == ["e2", "e3", "e4", "e5"]  # cursor, due, sent instead
    assert found["flow_ids"] == [first.id, resume.id]
    assert found["stream_ids"] == [first.id]
    assert found["request_ids"] == []  # a standalone stream answers no request
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
    assert set(verdict.found) <= {"phantom-resume", "causal-gap", "capture-health"}
