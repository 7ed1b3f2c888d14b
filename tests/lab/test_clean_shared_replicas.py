"""clean-shared-replicas: resumes answered by another replica that shares the event store."""

from __future__ import annotations

import pytest

from analyzer.analysis import read_timeline
from analyzer.detectors import run_detectors
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-shared-replicas")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_requests_alternate_between_the_two_replicas(run: LabRun) -> None:
    served = [f.response_header("x-served-by") for f in run.flows]
    assert set(served) == {"replica-a", "replica-b"}
    sessions = {f.response_header("mcp-session-id") or f.request_header("mcp-session-id")
                for f in run.flows}  # fmt: skip
    assert len(sessions) == 1  # one session, served by both


def test_each_resume_is_answered_by_the_other_replica_with_the_rest(run: LabRun) -> None:
    calls = run.calls("slow_report")
    resumes = [f for f in run.resumes if f.method == "GET"]
    assert len(calls) == len(resumes) == 2
    for call, resume in zip(calls, resumes, strict=True):
        assert call.events[-1].id == resume.request_header("last-event-id")
        assert resume.status == 200
        assert resume.response_header("x-served-by") != call.response_header("x-served-by")
        messages = resume.messages
        # The gate stays open after the first call: the second one's stream may close before
        # progress 1 is written to it, and the resume replays it with the rest.
        progress = [m["params"]["progress"] for m in call.messages + messages if "method" in m]
        assert progress == [1, 2, 3]
        assert call.body is not None
        assert messages[-1]["id"] == call.body["id"] and "result" in messages[-1]


def test_no_finding_though_the_timeline_sees_the_replica_change(run: LabRun) -> None:
    timeline = read_timeline([run.directory / "capture"], cache=False)
    changed = timeline.resumptions.collect()["replica_changed"].to_list()
    assert changed == [True, True]  # the condition cross-replica-resume starts from
    assert run_detectors(timeline).is_empty()
