"""cleared-final-response: the final response is cleared from the store before the resume."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("cleared-final-response")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["lost-response"]
    assert run.expected["evidence"] == {"request_ids": ["3"]}


def test_the_call_broke_and_its_resume_found_nothing(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    assert [m["params"]["progress"] for m in call.messages] == [1, 2]
    assert call.end is not None and call.end["how"] == "client_closed"
    # The tool finished while the client was away; its result cleared the whole stream.
    assert run.notes["buffer_at_resume"] == []
    (resume,) = run.resumes
    assert resume.method == "GET" and resume.request_header("last-event-id") == "e3"
    assert resume.status == 200 and resume.events == []
    assert resume.end is not None and resume.end["how"] == "complete"
    assert not any("id" in m and "method" not in m for f in run.flows[3:] for m in f.messages)
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200


def test_lost_response_names_the_request(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "lost-response")
    (call,) = run.calls("slow_report")
    assert found["severity"] == "high"
    assert found["request_ids"] == ["3"]
    assert found["stream_ids"] == [call.id]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
