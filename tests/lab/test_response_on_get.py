"""response-on-get: a tools/call answered 202, its response carried by the standalone GET stream."""

from __future__ import annotations

import json

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("response-on-get")


def _get(run: LabRun) -> Flow:
    (get,) = [f for f in run.flows if f.method == "GET"]
    return get


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["response-on-get-stream"]
    assert run.expected["evidence"] == {
        "event_ids": [run.notes["response_event_id"]],
        "request_ids": [json.dumps(run.notes["call_id"])],
    }


def test_the_call_was_answered_202_without_a_body(run: LabRun) -> None:
    (call,) = run.calls("lookup")
    assert call.body is not None and call.body["id"] == run.notes["call_id"]
    assert "_meta" not in call.body["params"]  # no progress token: it would be answered JSON
    assert call.status == 202
    assert call.response is not None and not call.response.get("streamed")
    assert not (call.response.get("body") or {}).get("text")


def test_the_get_stream_opened_without_a_cursor_carried_the_response(run: LabRun) -> None:
    get = _get(run)
    (call,) = run.calls("lookup")
    assert get.request_header("last-event-id") is None and get.status == 200
    assert [e.id for e in get.events] == run.notes["get_event_ids"]
    priming, opened, answer = get.events
    assert priming.message is None
    assert opened.message is not None and opened.message["method"] == "notifications/message"
    assert answer.id == run.notes["response_event_id"]
    assert answer.message is not None and answer.message["id"] == run.notes["call_id"]
    assert "result" in answer.message
    assert get.request_ts < call.request_ts
    assert get.end is not None and call.request_ts < int(get.end["ts_ns"])
    assert {f.response_header("x-served-by") for f in run.flows} == {"response-on-get"}
