"""answered-twice: one tools/call answered on its stream with two different results."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("answered-twice")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["duplicate-response"]
    assert run.expected["evidence"] == {
        "event_ids": run.notes["answer_event_ids"],
        "request_ids": [json.dumps(run.notes["call_id"])],
    }
    assert {f.response_header("x-served-by") for f in run.flows} == {"answered-twice"}


def test_one_request_two_different_results_on_its_stream(run: LabRun) -> None:
    (call,) = run.calls("create_ticket")
    assert call.body is not None and call.body["id"] == run.notes["call_id"]
    assert call.response_header("content-type") == "text/event-stream"
    assert [e.id for e in call.events] == run.notes["call_event_ids"] == ["e1", "e2", "e3", "e4"]
    assert call.events[0].data == ""  # priming
    progress, first, second = call.messages
    assert progress["method"] == "notifications/progress"
    assert first["id"] == second["id"] == call.body["id"]
    texts = [m["result"]["content"][0]["text"] for m in (first, second)]
    assert texts == run.notes["answer_texts"]
    assert texts[0].startswith("filed ticket T-1") and texts[1].startswith("filed ticket T-2")
    assert call.end is not None and call.end["how"] in ("complete", "server_closed")
    assert run.notes["tickets"] == 2  # the server ran the tool twice for one request


def test_the_client_sent_the_call_once(run: LabRun) -> None:
    assert [f.rpc_method for f in run.flows if f.method == "POST"] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]
    assert run.flows[-1].method == "DELETE" and run.flows[-1].status == 200


def test_duplicate_response_cites_both_answers(run: LabRun, findings: list[dict[str, Any]]) -> None:
    (found,) = of(findings, "duplicate-response")
    assert found["severity"] == "high"
    assert found["request_ids"] == ["3"]
    assert found["event_ids"] == ["e3", "e4"]
    (call,) = run.calls("create_ticket")
    assert found["flow_ids"] == [call.id]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
    assert set(verdict.found) <= {"duplicate-response", "capture-health"}
