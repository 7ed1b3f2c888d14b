"""clean-typescript-client: the TypeScript SDK client resumes a stream the SDK server closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab_capture import (
    LabRun,
    LabRuns,
    assert_tool_stream_resumed_after_retry,
    assert_well_formed,
)
from tests.support.lab_findings import assert_clean_and_resumed_in_place

pytestmark = [pytest.mark.timeout(360)]  # npm ci may run first


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-typescript-client")


def test_capture_is_well_formed_and_the_client_is_the_typescript_one(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}
    assert run.notes["protocol_version"] == "2025-11-25"
    assert run.notes["report"] == "report done in 3 steps"
    flows = run.flows
    assert [(f.method, f.rpc_method) for f in flows] == [
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("GET", None),  # the transport's standalone stream
        ("POST", "tools/list"),
        ("POST", "tools/call"),
        ("GET", None),  # the resume
        ("POST", "tools/call"),
        ("DELETE", None),
    ]
    assert {f.request_header("user-agent") for f in flows} == {"node"}  # Node's fetch


def test_the_transport_resumes_after_retry_and_gets_the_rest_replayed(run: LabRun) -> None:
    call, resume = assert_tool_stream_resumed_after_retry(run)
    (replay,) = run.notes["replays"]  # what the server says it replayed
    assert resume.request_header("last-event-id") == call.events[-1].id == replay["cursor"]
    assert [e.id for e in resume.events if e.data] == replay["replayed"]


def test_no_finding_and_the_resume_is_an_incarnation_of_the_tool_stream(
    run: LabRun, tmp_path: Path
) -> None:
    (call,) = run.calls("slow_report")
    assert_clean_and_resumed_in_place(run, tmp_path / "report.json", call.id)
