"""replayed-twice: the stored response is replayed on the resume, then written there again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("replayed-twice")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["double-delivery"]
    assert run.expected["evidence"] == {"event_ids": ["e6"], "request_ids": ["3"]}


def test_the_resume_carries_the_response_twice(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    assert call.end is not None and call.end["how"] == "client_closed"
    (resume,) = run.resumes
    assert resume.request_header("last-event-id") == "e3" and resume.status == 200
    assert [e.id for e in resume.events] == run.notes["resume_event_ids"]
    assert [e.id for e in resume.events] == ["e4", "e5", "e6", "e6"]
    *progress, first, second = resume.messages
    assert [m["params"]["progress"] for m in progress] == [3, 4]
    assert first == second and first["id"] == 3 and "result" in first
    assert resume.events[-1].data == resume.events[-2].data  # byte for byte the same event


def test_double_delivery_names_it(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "double-delivery")
    (call,) = run.calls("slow_report")
    (resume,) = run.resumes
    assert found["severity"] == "high"
    assert found["event_ids"] == ["e6"] and found["request_ids"] == ["3"]
    assert found["flow_ids"] == [resume.id] and found["stream_ids"] == [call.id]
    # Same result both times: neither duplicate-response nor duplicate-event-id applies.
    assert of(findings, "duplicate-response") == of(findings, "duplicate-event-id") == []
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
