"""empty-get-storm: every standalone GET stream ends empty at once; the client reopens it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from lab.scenarios.empty_get_storm import ATTEMPTS
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("empty-get-storm")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["reconnect-storm"]


def test_each_get_is_ended_empty_and_reopened_without_a_cursor(run: LabRun) -> None:
    gets = [f for f in run.flows if f.method == "GET"]
    assert len(gets) == run.notes["attempts"] == ATTEMPTS
    for flow in gets:
        assert flow.request_header("last-event-id") is None
        assert flow.status == 200
        assert (flow.response_header("content-type") or "").startswith("text/event-stream")
        assert flow.chunks == [] or all(not c["data"].get("text") for c in flow.chunks)
        assert flow.end is not None and flow.end["how"] == "complete"
    # Each reconnect follows the previous end within a second.
    for before, after in itertools.pairwise(gets):
        assert before.end is not None
        assert 0 <= after.request_ts - before.end["ts_ns"] < 1_000_000_000
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200


def test_reconnect_storm_names_the_run(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "reconnect-storm")
    assert found["severity"] == "medium"
    assert found["flow_ids"] == [f.id for f in run.flows if f.method == "GET"]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
