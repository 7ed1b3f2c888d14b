"""split-stream-id: a standalone-stream resume replays nothing and later notifications vanish."""

from __future__ import annotations

from typing import Any

import pytest

from lab.scenarios.split_stream_id import ALERT
from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("split-stream-id")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def _gets(run: LabRun) -> tuple[Flow, Flow]:
    first, resume = [f for f in run.flows if f.method == "GET"]
    return first, resume


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["causal-gap"]
    ids = [run.notes["cursor"], run.notes["unhandled_event_id"]]
    assert run.expected["evidence"] == {"event_ids": ids}


def test_the_standalone_stream_carried_the_alert_after_the_cursor(run: LabRun) -> None:
    first, _ = _gets(run)
    assert first.request_header("last-event-id") is None and first.status == 200
    ids = [e.id for e in first.events]
    assert ids == run.notes["get_event_ids"]
    assert all(i is not None and i.startswith("_GET_stream_") for i in ids)
    assert first.events[0].data == ""  # priming
    opened, alert = first.messages
    assert opened["method"] == alert["method"] == "notifications/message"
    assert alert["params"]["data"] == ALERT
    assert first.events[1].id == run.notes["cursor"]
    assert first.end is not None and first.end["how"] == "client_closed"


def test_the_resume_is_answered_200_with_keep_alives_only(run: LabRun) -> None:
    _, resume = _gets(run)
    assert resume.request_header("last-event-id") == run.notes["cursor"]
    assert resume.status == 200 and resume.response_header("content-type") == "text/event-stream"
    assert resume.events == []  # nothing replayed, nothing new
    text = "".join(chunk["data"].get("text", "") for chunk in resume.chunks)
    assert text.count(": keep-alive\n\n") >= 2  # the connection looks healthy
    # The later alert was issued on the stream with no connection: it never passed the wire.
    later = run.notes["later_event_id"]
    assert run.notes["later_sent"] is False
    assert all(e.id != later for flow in run.flows for e in flow.events)


def test_causal_gap_names_the_lost_alert(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "causal-gap")
    first, resume = _gets(run)
    assert found["severity"] == "high"
    assert found["event_ids"] == [run.notes["cursor"], run.notes["unhandled_event_id"]]
    assert found["flow_ids"] == [first.id, resume.id]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
