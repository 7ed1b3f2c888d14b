"""clean-typescript-client: the TypeScript SDK client resumes a stream the SDK server closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.timeline import load_timeline
from lab.framework import Expected
from lab.ts import ensure_installed
from lab.verdict import judge
from tests.support.lab_capture import LabRun, assert_well_formed, requires_proxy, run_lab
from tests.support.lab_findings import analyze_report

pytestmark = [requires_proxy, pytest.mark.timeout(360)]  # npm ci may run first


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> LabRun:
    ensure_installed()  # npm ci in lab/ts when the pinned SDK is missing
    return run_lab("clean-typescript-client", tmp_path_factory.mktemp("lab"))


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
    (call,) = run.calls("slow_report")
    events = call.events
    assert events[0].data == "" and events[0].id and events[0].retry == run.notes["retry_ms"]
    assert [m["params"]["progress"] for m in call.messages] == [1]  # then the server closed
    assert call.end is not None and call.end["how"] in ("complete", "server_closed")
    (replay,) = run.notes["replays"]
    (resume,) = run.resumes
    assert resume.method == "GET" and resume.status == 200
    assert resume.request_header("last-event-id") == events[-1].id == replay["cursor"]
    waited_ms = (resume.request_ts - int(call.end["ts_ns"])) / 1e6
    assert waited_ms >= run.notes["retry_ms"] * 0.9
    assert [e.id for e in resume.events if e.data] == replay["replayed"]
    messages = resume.messages
    assert [m["params"]["progress"] for m in messages if "method" in m] == [2, 3]
    assert call.body is not None
    assert messages[-1]["id"] == call.body["id"] and "result" in messages[-1]
    assert run.notes["progress_seen"] == [1, 2, 3]


def test_no_finding_and_the_resume_is_an_incarnation_of_the_tool_stream(
    run: LabRun, tmp_path: Path
) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    assert report["findings"] == []
    assert judge(Expected.from_json(run.expected), report["findings"]).ok
    timeline = load_timeline([run.directory / "capture"], cache=False)
    resumes = timeline.resumptions.select(
        "status", "stream_id", "answer_stream_id", "answer_incarnation", "events_after"
    ).collect()
    (call,) = run.calls("slow_report")
    streams = timeline.exchanges.select("flow_id", "stream_id").collect()
    (tool_stream,) = streams.filter(streams["flow_id"] == call.id)["stream_id"]
    assert resumes.to_dicts() == [
        {
            "status": "resolved",
            "stream_id": tool_stream,
            "answer_stream_id": tool_stream,
            "answer_incarnation": 1,
            "events_after": 0,  # the cursor was the last event the client got
        }
    ]
