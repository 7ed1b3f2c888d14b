"""resume-loop: five resumes of a tool's stream, each answered with a new priming event only."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("resume-loop")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["resume-loop"]
    assert run.expected["evidence"] == {
        "event_ids": ["e2", "e6", "e7", "e8", "e9"],
        "request_ids": ["3"],
    }
    assert all(f.response_header("x-served-by") == "resume-loop" for f in run.flows)


def test_server_ends_the_call_stream_after_progress_1(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 3
    assert [e.id for e in call.events] == ["e1", "e2"]
    assert call.events[0].data == "" and call.events[0].retry is None
    assert [m["params"]["progress"] for m in call.messages] == [1]
    assert call.end is not None and call.end["how"] in ("complete", "server_closed")


def test_five_resumes_each_bring_only_a_new_priming_event(run: LabRun) -> None:
    resumes = [f for f in run.flows if f.method == "GET"]
    assert [f.request_header("last-event-id") for f in resumes] == ["e2", "e6", "e7", "e8", "e9"]
    assert [[e.id for e in f.events] for f in resumes] == [["e6"], ["e7"], ["e8"], ["e9"], ["e10"]]
    for resume in resumes:
        assert resume.status == 200
        assert all(e.data == "" for e in resume.events)  # priming only: no message, no result
        assert resume.end is not None and resume.end["how"] in ("complete", "server_closed")
    # The result of request 3 never reached the client anywhere.
    delivered = [m for f in run.flows for m in f.messages if m.get("id") == 3 and "result" in m]
    assert delivered == []


def test_client_gives_up_and_ends_the_session(run: LabRun) -> None:
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200
