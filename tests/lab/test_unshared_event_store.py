"""unshared-event-store: a resume on the replica that holds no events replays nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("unshared-event-store")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["cross-replica-resume"]
    served = [(f.method, f.response_header("x-served-by")) for f in run.flows]
    assert served == [
        ("POST", "replica-a"),
        ("POST", "replica-b"),
        ("POST", "replica-a"),
        ("POST", "replica-b"),
        ("POST", "replica-a"),
        ("GET", "replica-b"),
        ("DELETE", "replica-a"),
    ]


def test_the_other_replica_knows_the_session_but_replays_nothing(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    # Replica a finished the call into its own buffer: the result is there, never sent.
    assert run.notes["replica_a_buffer"] == ["e1", "e2", "e3", "e4", "e5", "e6"]
    (resume,) = run.resumes
    assert resume.request_header("last-event-id") == "e3"
    assert resume.status == 200 and resume.events == []  # not 404: the session is shared


def test_cross_replica_resume_names_it(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "cross-replica-resume")
    (call,) = run.calls("slow_report")
    (resume,) = run.resumes
    assert found["event_ids"] == ["e3"]
    assert found["flow_ids"] == [call.id, resume.id]
    assert [f["request_ids"] for f in of(findings, "lost-response")] == [["4"]]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
