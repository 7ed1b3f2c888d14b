"""clean-resume: a server-closed tool stream resumed correctly by the official client."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-resume")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_session_opens_lists_tools_and_listens_on_a_get_stream(run: LabRun) -> None:
    flows = run.flows
    init = flows[0]
    assert init.rpc_method == "initialize" and init.status == 200
    session = init.response_header("mcp-session-id")
    assert session
    assert [f for f in flows if f.rpc_method == "tools/list" and f.status == 200]
    standalone = [f for f in flows if f.method == "GET" and not f.request_header("last-event-id")]
    assert len(standalone) == 1 and standalone[0].status == 200
    notes = [m for m in standalone[0].messages if m.get("method") == "notifications/message"]
    assert [m["params"]["data"] for m in notes] == ["maintenance window at 02:00"]
    assert all(f.request_header("mcp-session-id") == session for f in flows[1:])


def test_server_closes_the_tool_stream_with_retry_after_progress_1(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    events = call.events
    assert events[0].data == "" and events[0].id and events[0].retry == run.notes["retry_ms"]
    progress = [m["params"]["progress"] for m in call.messages]
    assert progress == [1]  # and no response: the server closed the connection, not the stream
    assert call.end is not None
    assert events[-1].id == run.notes["resume_cursor"]


def test_client_resumes_after_retry_and_gets_the_rest_replayed(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    resumes = [f for f in run.resumes if f.method == "GET"]
    assert len(resumes) == 1
    resume = resumes[0]
    assert resume.request_header("last-event-id") == run.notes["resume_cursor"]
    assert resume.status == 200
    assert call.end is not None
    assert call.end["how"] in ("complete", "server_closed")
    waited_ms = (resume.request_ts - int(call.end["ts_ns"])) / 1e6
    assert waited_ms >= run.notes["retry_ms"] * 0.9
    replayed = [e for e in resume.events if e.data]
    assert [e.id for e in replayed] == run.notes["replayed_event_ids"]
    messages = resume.messages
    assert [m["params"]["progress"] for m in messages if "method" in m] == [2, 3]
    assert call.body is not None
    assert messages[-1]["id"] == call.body["id"] and "result" in messages[-1]
    assert resume.events[-1].data == "" and resume.events[-1].retry  # a new priming event


def test_session_ends_with_delete(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].status == 200
