"""ring-buffer-eviction: the resume replays only the tail a bounded buffer kept."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("ring-buffer-eviction")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["causal-gap"]
    assert run.expected["evidence"] == {"event_ids": ["e4", "e7"], "request_ids": ["3"]}
    assert all(f.response_header("x-served-by") == "ring-buffer" for f in run.flows)


def test_tool_stream_is_dropped_after_progress_3(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 3
    assert [e.id for e in call.events] == ["e1", "e2", "e3", "e4"]
    assert call.events[0].data == ""
    assert [m["params"]["progress"] for m in call.messages] == [1, 2, 3]
    assert call.end is not None and call.end["how"] == "client_closed"


def test_resume_from_e4_replays_only_the_surviving_tail(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    (resume,) = [f for f in run.flows if f.method == "GET"]
    assert resume.request_header("last-event-id") == "e4" and resume.status == 200
    assert call.end is not None and int(call.end["ts_ns"]) < resume.request_ts
    assert [e.id for e in resume.events] == ["e7", "e8", "e9", "e10"]  # e5, e6 were evicted
    progress = [m["params"]["progress"] for m in resume.messages if "method" in m]
    assert progress == [6, 7, 8]  # 4 and 5 never reach the client
    assert resume.messages[-1]["id"] == 3 and "result" in resume.messages[-1]
    assert resume.end is not None and resume.end["how"] == "complete"


def test_session_ends_with_delete(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].status == 200
