"""open-at-shutdown: the proxy stops while the client's standalone GET stream is open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analyzer.cli import main as seamwatch
from lab.framework import Expected
from lab.verdict import judge
from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("open-at-shutdown")


def _get(run: LabRun) -> Flow:
    (get,) = [f for f in run.flows if f.method == "GET"]
    return get


def test_capture_is_well_formed_and_the_proxy_stopped_cleanly(run: LabRun) -> None:
    assert_well_formed(run)  # capture_close is there: a clean stop, nothing lost
    assert run.expected == {
        "required": ["capture-health"],
        "any_of": [],
        "allowed": [],
        "evidence": {},
    }
    record = json.loads((run.directory / "lab.json").read_text(encoding="utf-8"))
    proxy = next(p for p in record["processes"] if p["name"] == "proxy")
    assert proxy["stopped"] == "sigterm" and proxy["returncode"] == 0


def test_only_the_get_stream_was_open_at_shutdown(run: LabRun) -> None:
    get = _get(run)
    assert get.status == 200 and get.request_header("last-event-id") is None
    assert get.end is not None and get.end["how"] == "open_at_shutdown"
    others = [f for f in run.flows if f.id != get.id]
    assert all(f.end is not None and f.end["how"] != "open_at_shutdown" for f in others)
    assert "DELETE" not in {f.method for f in run.flows}  # the session was never ended


def test_the_announcement_arrived_on_the_get_stream(run: LabRun) -> None:
    (event,) = _get(run).events
    assert event.message is not None
    assert event.message["method"] == "notifications/message"
    assert event.message["params"]["data"] == "capture stops in a moment"
    assert run.notes["announcements"] == ["capture stops in a moment"]
    (call,) = run.calls("announce")
    assert "result" in call.messages[-1]


def test_one_info_capture_health_finding_cites_the_open_stream(run: LabRun, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    argv = ["analyze", str(run.directory / "capture"), "--format", "json", "--fail-on", "none"]
    assert seamwatch([*argv, "--no-cache", "--out", str(out)]) == 0
    findings: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))["findings"]
    get = _get(run)
    session = f"mcp:{get.request_header('mcp-session-id')}"
    assert [(f["detector"], f["severity"], f["session"]) for f in findings] == [
        ("capture-health", "info", session)
    ]
    assert findings[0]["flow_ids"] == [get.id] and findings[0]["stream_ids"] == [get.id]
    assert judge(Expected.from_json(run.expected), findings).ok
