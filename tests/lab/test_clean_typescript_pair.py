"""clean-typescript-pair: the TypeScript SDK's client resumes a stream its server closed."""

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
    return lab_runs.load("clean-typescript-pair")


def test_the_transport_resumes_after_retry_and_gets_the_rest_replayed(run: LabRun) -> None:
    assert_well_formed(run)
    assert {f.request_header("user-agent") for f in run.flows} == {"node"}  # Node's fetch
    assert run.notes["protocol_version"] == "2025-11-25"
    assert_tool_stream_resumed_after_retry(run)
    assert run.notes["attempts"] == ["result"]


def test_no_finding_and_the_resume_is_an_incarnation_of_the_tool_stream(
    run: LabRun, tmp_path: Path
) -> None:
    (call,) = run.calls("slow_report")
    assert_clean_and_resumed_in_place(run, tmp_path / "report.json", call.id)
