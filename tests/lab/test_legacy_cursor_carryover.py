"""legacy-cursor-carryover: the last SSE id of session A sent with initialize of session B."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("legacy-cursor-carryover")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["stale-cursor"]
    assert run.expected["evidence"] == {"event_ids": [run.notes["carried_cursor"]]}


def test_cursor_was_issued_in_session_a_and_carried_into_session_b(run: LabRun) -> None:
    cursor = run.notes["carried_cursor"]
    inits = [f for f in run.flows if f.rpc_method == "initialize"]
    assert len(inits) == 2
    session_a = inits[0].response_header("mcp-session-id")
    session_b = inits[1].response_header("mcp-session-id")
    assert session_a and session_b and session_a != session_b
    assert [session_a, session_b] == run.notes["sessions"]

    issued_in_a = [
        event.id
        for flow in run.flows
        if flow.request_header("mcp-session-id") == session_a or flow is inits[0]
        for event in flow.events
    ]
    assert issued_in_a[-1] == cursor  # the last SSE id session A delivered

    assert inits[0].request_header("last-event-id") is None
    assert inits[1].request_header("last-event-id") == cursor
    assert inits[1].status == 200
    assert cursor not in [event.id for event in inits[1].events]


def test_session_a_was_deleted_before_b_opened(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    inits = [f for f in run.flows if f.rpc_method == "initialize"]
    assert [d.status for d in deletes] == [200, 200]
    assert deletes[0].request_header("mcp-session-id") == run.notes["sessions"][0]
    assert deletes[0].request_ts < inits[1].request_ts
