"""cut-stream-typescript-client: a stream ended before its result, with nothing to resume from."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.framework import Expected
from lab.verdict import judge
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_report

pytestmark = [pytest.mark.timeout(360)]  # npm ci may run first


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("cut-stream-typescript-client")


def test_the_client_times_out_cancels_and_calls_again(run: LabRun) -> None:
    assert_well_formed(run)
    assert {f.request_header("user-agent") for f in run.flows} == {"node"}  # Node's fetch
    first, second = run.calls("slow_report")
    assert first.body is not None and first.body["id"] == 2
    assert [e.id for e in first.events] == [None]  # no event id, no priming event
    assert [m["params"]["progress"] for m in first.messages] == [1]  # then the server ended it
    assert first.end is not None and first.end["how"] == "complete"
    assert run.resumes == []  # nothing to resume from
    (cancel,) = [f for f in run.flows if f.rpc_method == "notifications/cancelled"]
    assert cancel.body is not None and cancel.body["params"]["requestId"] == 2
    assert cancel.request_ts > int(first.end["ts_ns"])  # the loss came first
    assert second.body is not None and second.body["id"] == 3
    assert "result" in second.messages[-1]
    assert run.notes["attempts"] == ["failed: MCP error -32001: Request timed out", "result"]


def test_lost_response_despite_the_cancellation(run: LabRun, tmp_path: Path) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    verdict = judge(Expected.from_json(run.expected), report["findings"])
    assert verdict.ok, verdict
    (finding,) = report["findings"]
    assert (finding["detector"], finding["severity"]) == ("lost-response", "high")
    assert finding["request_ids"] == ["2"]
    assert "cancelled it only" in finding["detail"]
