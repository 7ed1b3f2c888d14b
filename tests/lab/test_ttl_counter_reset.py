"""ttl-counter-reset: a TTL collects the stream's buffer; the resume restarts the ids."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("ttl-counter-reset")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["counter-reset"]
    assert run.expected["any_of"] == [["causal-gap", "lost-response"]]


def test_tool_stream_is_dropped_after_progress_2(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 3
    assert [e.id for e in call.events] == ["e1", "e2", "e3"]
    assert [m["params"]["progress"] for m in call.messages] == [1, 2]
    assert call.end is not None and call.end["how"] == "client_closed"


def test_buffer_was_collected_while_the_session_lived(run: LabRun) -> None:
    assert run.notes["collected_buffers"] == [run.notes["session"]]
    (resume,) = [f for f in run.flows if f.method == "GET"]
    assert resume.request_header("mcp-session-id") == run.notes["session"]
    assert resume.status == 200  # the session is still there


def test_resume_from_e3_restarts_numbering_and_never_delivers_the_result(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    (resume,) = [f for f in run.flows if f.method == "GET"]
    assert resume.request_header("last-event-id") == "e3"
    assert [e.id for e in resume.events] == ["e1", "e2"]
    assert resume.events[0].data == ""  # a new priming event under a restarted counter
    old_e2 = next(e for e in call.events if e.id == "e2")
    assert resume.events[1].data != old_e2.data
    assert [m.get("method") for m in resume.messages] == ["notifications/message"]
    responses = [m for f in run.flows for m in f.messages if m.get("id") == 3]
    assert responses == []  # request 3's result never reached the client


def test_session_ends_with_delete(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].status == 200
