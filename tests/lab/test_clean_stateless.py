"""clean-stateless: the SDK's `stateless_http` server (2025, no sessions), the official client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import assert_clean_in_one_anon_session

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-stateless")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}
    assert run.notes["protocol_version"] == "2025-11-25"


def test_no_session_header_anywhere_and_no_get_stream(run: LabRun) -> None:
    flows = run.flows
    assert [f.rpc_method for f in flows] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    assert all(f.method == "POST" for f in flows)  # no GET stream, no DELETE
    for flow in flows:
        assert flow.request_header("mcp-session-id") is None
        assert flow.response_header("mcp-session-id") is None
    (init,) = flows[0].messages
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert all(f.request_header("mcp-protocol-version") == "2025-11-25" for f in flows[1:])


def test_progress_streams_on_the_call_without_cursors(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.response_header("content-type") == "text/event-stream"
    messages = call.messages
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3]
    assert messages[-1]["result"]["content"][0]["text"] == "report done in 3 steps"
    assert all(event.id is None for event in call.events)  # stateless: no event store
    assert run.notes["progress_seen"] == [1, 2, 3]


def test_no_finding_and_one_anon_session_keyed_by_its_initialize(
    run: LabRun, tmp_path: Path
) -> None:
    assert_clean_in_one_anon_session(run, tmp_path / "report.json")
