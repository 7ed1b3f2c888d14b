"""ring-buffer-typescript-client: the TypeScript SDK client resumes into an evicted buffer."""

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
    return lab_runs.load("ring-buffer-typescript-client")


def test_the_transport_resumes_and_gets_only_the_surviving_tail(run: LabRun) -> None:
    assert_well_formed(run)
    assert {f.request_header("user-agent") for f in run.flows} == {"node"}  # Node's fetch
    (call,) = run.calls("slow_report")
    assert call.body is not None and call.body["id"] == 2
    assert [m["params"]["progress"] for m in call.messages] == [1]  # then the server ended it
    (resume,) = run.resumes
    assert resume.method == "GET" and resume.status == 200
    assert resume.request_header("last-event-id") == call.events[-1].id
    assert call.end is not None
    assert (resume.request_ts - int(call.end["ts_ns"])) / 1e6 >= 300 * 0.9  # the retry
    messages = resume.messages
    assert [m["params"]["progress"] for m in messages if "method" in m] == [6, 7, 8]
    assert messages[-1]["id"] == 2 and "result" in messages[-1]
    assert run.notes["progress_seen"] == [1, 6, 7, 8]  # the client took it for a continuation


def test_causal_gap_cites_the_cursor_and_the_first_replayed_event(
    run: LabRun, tmp_path: Path
) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    verdict = judge(Expected.from_json(run.expected), report["findings"])
    assert verdict.ok, verdict
    (finding,) = report["findings"]
    assert (finding["detector"], finding["severity"]) == ("causal-gap", "high")
    (call,) = run.calls("slow_report")
    (resume,) = run.resumes
    first_replayed = next(e.id for e in resume.events if e.data)
    assert finding["event_ids"] == [call.events[-1].id, first_replayed]
    assert finding["request_ids"] == ["2"]
