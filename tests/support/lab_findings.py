"""What `seamwatch analyze` finds in a lab run's capture, and how that compares with its
expected.json (`lab.verdict.judge`): the detector side of a scenario's test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analyzer.analysis import read_timeline
from analyzer.cli import main as seamwatch
from analyzer.detectors import DETECTORS
from lab.framework import Expected
from lab.verdict import Verdict, judge
from tests.support.lab_capture import LabRun


def analyze_report(run: LabRun, report: Path) -> dict[str, Any]:
    """The JSON report of `seamwatch analyze <run>/capture --format json` (run in this process)."""
    argv = ["analyze", str(run.directory / "capture"), "--format", "json", "--fail-on", "none"]
    code = seamwatch([*argv, "--no-cache", "--out", str(report)])
    assert code == 0, f"seamwatch analyze exited {code}"
    parsed: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return parsed


def analyze_run(run: LabRun, report: Path) -> list[dict[str, Any]]:
    """The findings of `analyze_report`."""
    findings: list[dict[str, Any]] = analyze_report(run, report)["findings"]
    return findings


def verdict_of(run: LabRun, findings: list[dict[str, Any]]) -> Verdict:
    """The findings judged against the run's expected.json."""
    expected = Expected.from_json(run.expected)
    return judge(expected, findings, registered=[det.id for det in DETECTORS])


def of(findings: list[dict[str, Any]], detector: str) -> list[dict[str, Any]]:
    """The findings of one detector."""
    return [f for f in findings if f["detector"] == detector]


def resumes_of(run: LabRun) -> list[dict[str, Any]]:
    """Each resume of the run's capture as the timeline resolved it: status, the stream its
    cursor names, the stream and incarnation its answer became, events owed after the cursor."""
    timeline = read_timeline([run.directory / "capture"], cache=False)
    columns = ("status", "stream_id", "answer_stream_id", "answer_incarnation", "events_after")
    return timeline.resumptions.select(columns).collect().to_dicts()


def assert_clean_and_resumed_in_place(run: LabRun, report: Path, stream: str) -> None:
    """No finding at all, and the run's one resume became incarnation 1 of `stream` (the
    opening flow's id, DESIGN.md §2), its cursor the last event the client got."""
    findings = analyze_run(run, report)
    assert findings == []
    assert judge(Expected.from_json(run.expected), findings).ok
    assert resumes_of(run) == [
        {
            "status": "resolved",
            "stream_id": stream,
            "answer_stream_id": stream,
            "answer_incarnation": 1,
            "events_after": 0,
        }
    ]


def assert_clean_in_one_anon_session(run: LabRun, report: Path) -> None:
    """No finding at all, and every exchange of the run in one `anon:<client ip>:<initialize
    flow id>` session keyed by its first flow, the initialize (DESIGN.md §2: a 2025 server
    without sessions)."""
    findings = analyze_run(run, report)
    assert findings == []
    assert judge(Expected.from_json(run.expected), findings).ok
    init = run.flows[0]
    client_ip = init.request["client"].rpartition(":")[0]
    key = f"anon:{client_ip}:{init.id}"
    timeline = read_timeline([run.directory / "capture"], cache=False)
    sessions = timeline.sessions.select("session_id", "kind", "era", "init_flow_id").collect()
    assert sessions.to_dicts() == [
        {"session_id": key, "kind": "anon", "era": "2025-11-25", "init_flow_id": init.id}
    ]
    exchanges = timeline.exchanges.select("flow_id", "session_id").collect()
    assert set(exchanges["session_id"]) == {key}
    assert sorted(exchanges["flow_id"]) == sorted(f.id for f in run.flows)
