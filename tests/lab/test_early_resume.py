"""early-resume: the server ends a stream after `retry: 2000`; the client resumes ~100 ms later."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("early-resume")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["retry-violation"]
    assert run.expected["evidence"] == {"event_ids": ["e3"]}
    assert all(f.response_header("x-served-by") == "early-resume" for f in run.flows)


def test_server_ends_the_call_stream_after_retry_2000(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 3
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    assert call.events[0].data == "" and call.events[0].retry == 2000
    assert [m["params"]["progress"] for m in call.messages] == [1, 2]
    # A server close: the response ended cleanly, with no result in it.
    assert call.end is not None and call.end["how"] in ("complete", "server_closed")


def test_resume_comes_about_100_ms_after_the_stream_end(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    (resume,) = [f for f in run.flows if f.method == "GET"]
    assert resume.request_header("last-event-id") == "e3" and resume.status == 200
    assert call.end is not None
    wait_ms = (resume.request_ts - int(call.end["ts_ns"])) / 1e6
    assert 50 <= wait_ms < 1000, wait_ms  # ~100 ms, far below the 2000 ms asked for
    assert [e.id for e in resume.events] == ["e4", "e5", "e6"]
    assert resume.messages[-1]["id"] == 3 and "result" in resume.messages[-1]
    assert resume.end is not None and resume.end["how"] == "complete"


def test_session_ends_with_delete(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].status == 200
