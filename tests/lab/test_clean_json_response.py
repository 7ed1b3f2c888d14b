"""clean-json-response: the SDK's `json_response` server (2025, sessions), the official client."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from lab.framework import Expected
from lab.verdict import judge
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_report

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-json-response")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}
    assert run.notes["protocol_version"] == "2025-11-25"


def test_every_post_is_answered_with_a_json_body(run: LabRun) -> None:
    flows = run.flows
    assert [(f.method, f.rpc_method) for f in flows] == [
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("GET", None),
        ("POST", "tools/list"),
        *[("POST", "tools/call")] * 4,
        ("DELETE", None),
    ]
    posts = [f for f in flows if f.method == "POST"]
    assert all(f.response_header("content-type") == "application/json" for f in posts)
    session = flows[0].response_header("mcp-session-id")
    assert session is not None
    assert all(f.request_header("mcp-session-id") == session for f in flows[1:])
    assert [f.tool for f in run.flows if f.rpc_method == "tools/call"] == [
        "announce",
        "charge_card",
        "charge_card",
        "get_balance",
    ]
    texts = [
        [m["result"]["content"][0]["text"] for m in call.messages]
        for call in run.calls("charge_card")
    ]
    assert texts == [
        ["charged 1250 cents to 4242-0001 (charge 1)"],
        ["charged 1250 cents to 4242-0002 (charge 2)"],
    ]


def test_the_announcement_comes_on_the_standalone_get_stream(run: LabRun) -> None:
    (get,) = [f for f in run.flows if f.method == "GET"]
    assert get.response_header("content-type") == "text/event-stream"
    (message,) = get.messages
    assert message["method"] == "notifications/message"
    assert message["params"]["data"] == "maintenance window at 02:00"
    assert all(event.id for event in get.events)


def test_no_finding_and_every_call_delivered_in_its_body(run: LabRun, tmp_path: Path) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    assert report["findings"] == []
    assert judge(Expected.from_json(run.expected), report["findings"]).ok
    timeline = read_timeline([run.directory / "capture"], cache=False)
    calls = timeline.tool_calls.select("tool_name", "first_outcome", "stream_id").collect()
    assert calls["first_outcome"].to_list() == ["delivered"] * 4
    assert calls["stream_id"].null_count() == 4  # a JSON body carries no stream
    sessions = timeline.sessions.select("kind", "era").collect()
    assert sessions.to_dicts() == [{"kind": "mcp", "era": "2025-11-25"}]
    streams = timeline.streams.select("kind").collect()
    assert streams.filter(pl.col("kind") != "get").is_empty()
