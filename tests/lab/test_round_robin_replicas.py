"""round-robin-replicas: a resume that lands on replica b, which reuses replica a's ids."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]

A, B = "replica-a", "replica-b"


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("round-robin-replicas")


def _flows(run: LabRun) -> dict[str, Flow]:
    names = ["initialize", "initialized", "tools/list", "ping", "call", "resume", "retry", "delete"]
    flows = run.flows
    assert len(flows) == len(names), [(f.method, f.rpc_method) for f in flows]
    return dict(zip(names, flows, strict=True))


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == [
        "duplicate-event-id",
        "cross-replica-resume",
        "repeated-tool-call",
    ]
    assert run.expected["any_of"] == [["phantom-resume", "causal-gap"]]


def test_requests_alternate_between_replicas_and_every_answer_names_its_replica(
    run: LabRun,
) -> None:
    flows = run.flows
    for flow in flows:
        assert flow.response is not None
        assert flow.response_header("x-served-by") == flow.response["replica"]
        assert flow.response["replica_source"] == "header"
    assert [f.response["replica"] for f in flows if f.response] == [A, B] * 4
    session = run.notes["session"]
    assert all(f.request_header("mcp-session-id") == session for f in flows[1:])


def test_replica_a_streams_e1_to_e9_and_the_client_drops(run: LabRun) -> None:
    call = _flows(run)["call"]
    assert call.tool == "create_ticket" and call.body is not None and call.body["id"] == 4
    assert [e.id for e in call.events] == [f"e{n}" for n in range(1, 10)]
    assert call.events[0].data == ""  # priming
    assert [m["params"]["progress"] for m in call.messages] == list(range(1, 9))
    assert call.end is not None and call.end["how"] == "client_closed"
    # Replica a finished the call into its own buffer: the result e10 never went out.
    assert run.notes["replica_a_buffer"][-1] == "e10"


def test_resume_from_e7_lands_on_replica_b_which_reuses_the_ids(run: LabRun) -> None:
    flows = _flows(run)
    call, resume = flows["call"], flows["resume"]
    assert resume.method == "GET" and resume.request_header("last-event-id") == "e7"
    assert resume.status == 200 and resume.response_header("x-served-by") == B
    assert [e.id for e in resume.events] == ["e1", "e2"]
    first_e2 = next(e for e in call.events if e.id == "e2")
    second_e2 = next(e for e in resume.events if e.id == "e2")
    assert first_e2.data != second_e2.data  # same id, another payload
    assert [m.get("method") for m in resume.messages] == ["notifications/message"]
    assert not any(m.get("id") == 4 for m in resume.messages)


def test_client_reissues_the_side_effecting_call_on_replica_a(run: LabRun) -> None:
    flows = _flows(run)
    call, retry = flows["call"], flows["retry"]
    assert call.body is not None and retry.body is not None
    assert retry.tool == "create_ticket" and retry.body["id"] == 5
    assert retry.body["params"]["arguments"] == call.body["params"]["arguments"]
    assert retry.response_header("x-served-by") == A
    assert [e.id for e in retry.events] == [f"e{n}" for n in range(11, 21)]
    assert retry.messages[-1]["id"] == 5 and "result" in retry.messages[-1]
    assert run.notes["tickets_filed"] == 2  # the ticket was filed twice


def test_tools_list_shows_create_ticket_without_annotations(run: LabRun) -> None:
    (listed,) = _flows(run)["tools/list"].messages
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert "annotations" not in tools["create_ticket"]
    assert tools["lookup"]["annotations"] == {"readOnlyHint": True}


def test_session_ends_with_delete_on_replica_b(run: LabRun) -> None:
    delete = _flows(run)["delete"]
    assert delete.method == "DELETE" and delete.status == 200
    assert delete.response_header("x-served-by") == B
