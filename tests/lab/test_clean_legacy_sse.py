"""clean-legacy-sse: a correct 2024-11-05 session on the SDK's legacy HTTP+SSE transport."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-legacy-sse")


def _sse(run: LabRun) -> Flow:
    (get,) = [f for f in run.flows if f.method == "GET"]
    return get


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_get_sse_opens_with_the_endpoint_event(run: LabRun) -> None:
    get = _sse(run)
    assert get.request["path"] == "/sse" and get.status == 200
    assert get.response_header("content-type").startswith("text/event-stream")  # type: ignore[union-attr]
    first = get.events[0]
    assert first.event == "endpoint" and first.data == run.notes["endpoint"]
    assert first.data.startswith("/messages/?session_id=")
    # No SSE ids in this era, and the client ended the stream.
    assert all(e.id is None for e in get.events)
    assert get.end is not None and get.end["how"] == "client_closed"


def test_posts_go_to_the_announced_url_and_answers_come_on_the_stream(run: LabRun) -> None:
    get = _sse(run)
    endpoint = get.events[0].data
    posts = [f for f in run.flows if f.method == "POST"]
    assert [f.rpc_method for f in posts] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    assert all(f.request["path"] == endpoint and f.status == 202 for f in posts)
    assert all(f.request_ts > get.request_ts for f in posts)
    # Every event after `endpoint` is an `event: message` carrying one JSON-RPC message.
    assert {e.event for e in get.events[1:]} == {"message"}
    messages = [m for m in (e.message for e in get.events[1:]) if m is not None]
    responses = [m for m in messages if "id" in m and "method" not in m]
    assert [m["id"] for m in responses] == [1, 2, 3, 4]
    assert responses[0]["result"]["protocolVersion"] == "2024-11-05"
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {p["progressToken"] for p in progress} == {"p3"}
    assert [f.tool for f in posts[3:]] == ["slow_report", "get_balance"]
