"""dropped-response: a resumed tool call whose replay ends without the result it owed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("dropped-response")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["lost-response"]
    assert run.expected["allowed"] == ["causal-gap"]
    assert run.expected["evidence"] == {"request_ids": [json.dumps(run.notes["call_id"])]}
    assert {f.response_header("x-served-by") for f in run.flows} == {"dropped-response"}


def test_the_client_drops_the_call_at_progress_2(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == run.notes["call_id"]
    assert [e.id for e in call.events] == run.notes["call_event_ids"] == ["e1", "e2", "e3"]
    assert [m["params"]["progress"] for m in call.messages] == [1, 2]
    assert call.end is not None and call.end["how"] == "client_closed"
    # The tool ran on to its end, but the buffer holds no result: e4, e5 are progress 3, 4.
    assert run.notes["buffer_at_resume"] == ["e1", "e2", "e3", "e4", "e5"]


def test_the_resume_replays_the_tail_and_ends_without_the_result(run: LabRun) -> None:
    (resume,) = [f for f in run.flows if f.method == "GET"]
    assert resume.request_header("last-event-id") == "e3" and resume.status == 200
    assert [e.id for e in resume.events] == run.notes["replayed_event_ids"] == ["e4", "e5"]
    assert [m["params"]["progress"] for m in resume.messages] == [3, 4]
    assert resume.end is not None and resume.end["how"] in ("complete", "server_closed")
    answers = [m for f in run.flows for m in f.messages if m.get("id") == run.notes["call_id"]]
    assert answers == []  # the result of the call reached the client nowhere
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200


def test_lost_response_flags_the_call(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "lost-response")
    assert found["severity"] == "high"
    assert found["request_ids"] == ["3"]
    (call,) = run.calls("slow_report")
    assert found["flow_ids"] == [call.id] and found["stream_ids"] == [call.id]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
    assert set(verdict.found) <= {"lost-response", "causal-gap", "capture-health"}
