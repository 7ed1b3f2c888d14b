"""clean-typescript-stateless: the TypeScript SDK's client and a stateless TypeScript server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import assert_clean_in_one_anon_session

pytestmark = [pytest.mark.timeout(360)]  # npm ci may run first


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-typescript-stateless")


def test_no_session_anywhere_and_the_get_stream_refused(run: LabRun) -> None:
    assert_well_formed(run)
    flows = run.flows
    assert [(f.method, f.rpc_method, f.status) for f in flows] == [
        ("POST", "initialize", 200),
        ("POST", "notifications/initialized", 202),
        ("GET", None, 405),  # the transport's standalone GET: no GET stream without sessions
        ("POST", "tools/list", 200),
        ("POST", "tools/call", 200),
        ("POST", "tools/call", 200),
    ]
    for flow in flows:
        assert flow.request_header("mcp-session-id") is None
        assert flow.response_header("mcp-session-id") is None
    assert {f.request_header("user-agent") for f in flows} == {"node"}  # Node's fetch


def test_progress_streams_on_the_call_without_cursors(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    assert call.response_header("content-type") == "text/event-stream"
    messages = call.messages
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3]
    assert messages[-1]["result"]["content"][0]["text"] == "report ready after 3 steps"
    assert all(event.id is None for event in call.events)  # no event store
    assert run.notes["progress_seen"] == [1, 2, 3]


def test_no_finding_and_one_anon_session_keyed_by_its_initialize(
    run: LabRun, tmp_path: Path
) -> None:
    assert_clean_in_one_anon_session(run, tmp_path / "report.json")
