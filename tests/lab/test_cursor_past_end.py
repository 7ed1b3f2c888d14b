"""cursor-past-end: a cursor past the end of the stream's log is answered 200, replaying nothing."""

from __future__ import annotations

from typing import Any

import pytest

from lab.scenarios.cursor_past_end import PAST_END
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("cursor-past-end")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["stale-cursor"]
    assert run.expected["evidence"] == {"event_ids": [PAST_END]}


def test_the_past_end_cursor_is_answered_as_a_resume(run: LabRun) -> None:
    first, resume = [f for f in run.flows if f.method == "GET"]
    assert [e.id for e in first.events] == ["_0", "_1", "_2"]  # Go SDK shape: <key>_<index>
    assert resume.request_header("last-event-id") == PAST_END
    assert resume.status == 200
    # An empty replay, then the live stream: the next event continues the log at _3.
    assert [e.id for e in resume.events] == ["_3"]
    (alert,) = resume.messages
    assert alert["method"] == "notifications/message"
    assert not any("error" in m for m in resume.messages)


def test_stale_cursor_names_it(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "stale-cursor")
    _, resume = [f for f in run.flows if f.method == "GET"]
    assert found["event_ids"] == [PAST_END]
    assert found["flow_ids"] == [resume.id]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
