"""replaced-resume: a second resume with the same cursor silently replaces the first."""

from __future__ import annotations

from typing import Any

import pytest

from lab.scenarios.replaced_resume import ORPHANED_S
from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("replaced-resume")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def _resumes(run: LabRun) -> tuple[Flow, Flow]:
    first, second = run.resumes
    return first, second


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["orphaned-incarnation"]
    assert run.expected["evidence"] == {"event_ids": ["e3"], "request_ids": ["3"]}


def test_both_resumes_are_answered_and_the_first_is_orphaned(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    first, second = _resumes(run)
    assert first.request_header("last-event-id") == second.request_header("last-event-id")
    assert first.status == second.status == 200  # not 409
    # The rest of the call went to the second connection only.
    assert [e.id for e in second.events] == run.notes["second_event_ids"] == ["e4", "e5", "e6"]
    assert second.messages[-1]["id"] == 3 and "result" in second.messages[-1]
    # The first carried nothing, and the server did not end it: the client did, later.
    assert first.events == []
    assert first.end is not None and first.end["how"] == "client_closed"
    assert second.request_ts < first.end["ts_ns"]  # both live at once
    assert second.end is not None
    assert first.end["ts_ns"] - second.end["ts_ns"] >= ORPHANED_S * 0.9 * 1e9


def test_orphaned_incarnation_names_it(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "orphaned-incarnation")
    (call,) = run.calls("slow_report")
    first, second = _resumes(run)
    assert found["flow_ids"] == [first.id, second.id]
    assert found["stream_ids"] == [call.id]
    assert found["event_ids"] == ["e3"] and found["request_ids"] == ["3"]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
