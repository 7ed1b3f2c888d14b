"""resume-after-delete: a DELETE answered 200, then a resume and a ping of that session, 200."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("resume-after-delete")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["resume-after-termination"]
    assert run.expected["evidence"] == {"event_ids": ["e2"], "request_ids": ["4"]}
    assert all(f.response_header("x-served-by") == "ignore-delete" for f in run.flows)


def test_tool_stream_is_dropped_after_progress_1(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 3
    assert [e.id for e in call.events] == ["e1", "e2"]
    assert call.end is not None and call.end["how"] == "client_closed"


def test_delete_200_then_resume_and_ping_answered_200(run: LabRun) -> None:
    session = run.notes["session"]
    flows = run.flows
    (delete,) = [f for f in flows if f.method == "DELETE"]
    assert delete.status == 200 and delete.request_header("mcp-session-id") == session
    after = [f for f in flows if f.request_ts > delete.request_ts]
    assert [f.method for f in after] == ["GET", "POST"]
    resume, ping = after
    assert delete.response is not None
    assert resume.request_ts > int(delete.response["ts_ns"])  # not in flight at the DELETE
    assert resume.request_header("mcp-session-id") == session
    assert resume.request_header("last-event-id") == "e2" and resume.status == 200
    assert [e.id for e in resume.events] == ["e3", "e4", "e5"]
    assert resume.messages[-1]["id"] == 3 and "result" in resume.messages[-1]
    assert ping.rpc_method == "ping" and ping.body is not None and ping.body["id"] == 4
    assert ping.request_header("mcp-session-id") == session and ping.status == 200
    assert ping.messages == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
