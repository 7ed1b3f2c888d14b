"""clean-modern: 2026-07-28 traffic of the official client, MRTR and read-only repeats."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-modern")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_every_exchange_is_a_sessionless_2026_post(run: LabRun) -> None:
    flows = run.flows
    assert flows[0].rpc_method == "server/discover"
    for flow in flows:
        assert flow.method == "POST"
        assert flow.request_header("mcp-protocol-version") == "2026-07-28"
        assert flow.request_header("mcp-session-id") is None
        assert flow.response_header("mcp-session-id") is None
        assert flow.request_header("mcp-method") == flow.rpc_method
        assert flow.status == 200


def test_mrtr_leg_answers_the_elicitation_under_a_new_id(run: LabRun) -> None:
    first, second = run.calls("create_ticket")
    assert first.body is not None and second.body is not None
    (asked,) = first.messages
    requests = asked["result"]["inputRequests"]
    assert [r["method"] for r in requests.values()] == ["elicitation/create"]
    assert second.body["id"] != first.body["id"]
    params = second.body["params"]
    assert set(params["inputResponses"]) == set(requests)
    assert params["requestState"] == asked["result"]["requestState"]
    assert params["arguments"] == first.body["params"]["arguments"]
    (done,) = second.messages
    assert done["result"]["content"][0]["text"] == "ticket 1 filed: printer on fire"


def test_read_only_call_is_repeated_identically(run: LabRun) -> None:
    calls = run.calls("get_balance")
    assert len(calls) == 2
    bodies = [c.body for c in calls]
    assert bodies[0] is not None and bodies[1] is not None
    assert bodies[0]["params"]["arguments"] == bodies[1]["params"]["arguments"]
    assert bodies[0]["id"] != bodies[1]["id"]


def test_progress_streams_on_sse_then_the_result(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.response_header("content-type") == "text/event-stream"
    messages = call.messages
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2]
    assert "result" in messages[-1]
    assert all(event.id is None for event in call.events)  # no cursors on 2026-07-28
