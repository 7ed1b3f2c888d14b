"""modern-retry: a 2026 side-effecting call whose stream broke, re-issued under a new id."""

from __future__ import annotations

import json

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("modern-retry")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    ids = [json.dumps(request_id) for request_id in run.notes["request_ids"]]
    assert run.expected["required"] == ["repeated-tool-call"]
    assert run.expected["evidence"] == {"request_ids": ids}


def test_tool_is_listed_as_side_effecting(run: LabRun) -> None:
    (listing,) = [f for f in run.flows if f.rpc_method == "tools/list"]
    (tools,) = listing.messages
    (charge,) = [t for t in tools["result"]["tools"] if t["name"] == "charge_card"]
    assert "annotations" not in charge


def test_first_call_stream_broke_after_the_tool_ran(run: LabRun) -> None:
    first, _retry = run.calls("charge_card")
    assert first.body is not None and first.body["id"] == run.notes["request_ids"][0]
    assert first.response_header("content-type") == "text/event-stream"
    (progress,) = first.messages
    assert progress["params"]["message"] == "charge 1 submitted"
    assert first.end is not None and first.end["how"] == "client_closed"
    assert run.notes["charges"][0]["outcome"] == "cancelled"


def test_same_call_reissued_under_a_new_id_and_answered(run: LabRun) -> None:
    first, retry = run.calls("charge_card")
    assert first.body is not None and retry.body is not None
    assert retry.body["id"] == run.notes["request_ids"][1] != first.body["id"]
    assert retry.body["params"]["arguments"] == first.body["params"]["arguments"]
    assert retry.request_header("mcp-protocol-version") == "2026-07-28"
    assert retry.request_header("mcp-session-id") is None
    result = retry.messages[-1]
    assert result["id"] == retry.body["id"]
    assert result["result"]["content"][0]["text"] == "charged 1999 cents to 4242 (charge 2)"
    assert [c["outcome"] for c in run.notes["charges"]] == ["cancelled", "settled"]
