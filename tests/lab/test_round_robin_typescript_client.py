"""round-robin-typescript-client: the TypeScript SDK client resumes on the wrong replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.framework import Expected
from lab.verdict import judge
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_report

pytestmark = [pytest.mark.timeout(360)]  # npm ci may run first


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("round-robin-typescript-client")


def test_the_resume_lands_on_the_other_replica_and_gets_a_fresh_stream(run: LabRun) -> None:
    assert_well_formed(run)
    assert {f.request_header("user-agent") for f in run.flows} == {"node"}  # Node's fetch
    first, _ = run.calls("create_ticket")
    assert first.response_header("x-served-by") == "replica-a"
    assert [m["params"]["progress"] for m in first.messages] == [1]  # then a ended it
    (resume,) = run.resumes
    assert resume.request_header("last-event-id") == first.events[-1].id
    assert resume.response_header("x-served-by") == "replica-b"
    (message,) = resume.messages
    assert message["method"] == "notifications/message"
    assert message["params"]["data"] == {"replica": "replica-b", "stream": "standalone"}
    # Every id of the fresh stream was issued by replica a before; its message with another
    # payload (the priming events of both are empty).
    issued_by_a = {
        e.id: e.data
        for f in run.flows
        if f.response_header("x-served-by") == "replica-a" and f.request_ts < resume.request_ts
        for e in f.events
    }
    assert all(e.id in issued_by_a for e in resume.events)
    assert all(issued_by_a[e.id] != e.data for e in resume.events if e.data)


def test_the_sdk_cancels_on_timeout_and_the_application_reissues(run: LabRun) -> None:
    first, again = run.calls("create_ticket")
    (resume,) = run.resumes
    (cancel,) = [f for f in run.flows if f.rpc_method == "notifications/cancelled"]
    assert cancel.body is not None and cancel.body["params"]["requestId"] == 2
    assert first.request_ts < resume.request_ts < cancel.request_ts < again.request_ts
    assert first.body is not None and again.body is not None
    assert (first.body["id"], again.body["id"]) == (2, 3)
    assert first.body["params"]["arguments"] == again.body["params"]["arguments"]
    assert again.messages[-1]["result"]["content"][0]["text"].startswith("filed ticket T-2")
    assert run.notes["tickets_filed"] == 2


def test_findings_name_the_reused_ids_the_replica_change_and_the_repeat(
    run: LabRun, tmp_path: Path
) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    verdict = judge(Expected.from_json(run.expected), report["findings"])
    assert verdict.ok, verdict
    by_detector = {f["detector"]: f for f in report["findings"]}
    assert by_detector["repeated-tool-call"]["severity"] == "high"  # the first was lost
    assert by_detector["repeated-tool-call"]["request_ids"] == ["2", "3"]
    (resume,) = run.resumes
    assert by_detector["cross-replica-resume"]["event_ids"] == [
        resume.request_header("last-event-id")
    ]
