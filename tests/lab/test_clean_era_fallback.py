"""clean-era-fallback: a refused 2026-07-28 probe, then a sessioned session; per-exchange eras."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.analysis import read_timeline
from lab.framework import Expected
from lab.verdict import judge
from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_report

pytestmark = [pytest.mark.timeout(360)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-era-fallback")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}
    assert run.notes["mode"] == "auto"
    assert run.notes["protocol_version"] == "2025-11-25"  # what the client settled on


def test_the_2026_probe_is_refused_without_a_session(run: LabRun) -> None:
    probe = run.flows[0]
    assert probe.method == "POST" and probe.rpc_method == "server/discover"
    assert probe.request_header("mcp-protocol-version") == "2026-07-28"
    assert probe.request_header("mcp-session-id") is None
    assert probe.status == 400 and probe.response_header("mcp-session-id") is None
    (refusal,) = probe.messages
    assert refusal["id"] is None and refusal["error"]["code"] == -32000


def test_the_client_falls_back_to_initialize_and_keeps_the_session(run: LabRun) -> None:
    init, *rest = run.flows[1:]
    assert init.rpc_method == "initialize" and init.body is not None
    assert init.body["params"]["protocolVersion"] == "2025-11-25"
    assert init.body["id"] != run.flows[0].body["id"]  # type: ignore[index]
    session = init.response_header("mcp-session-id")
    assert session is not None
    (result,) = [m for m in init.messages if "result" in m]
    assert result["result"]["protocolVersion"] == "2025-11-25"
    assert sorted(f.method for f in rest) == ["DELETE", "GET", "POST", "POST", "POST", "POST"]
    for flow in rest:
        assert flow.request_header("mcp-session-id") == session
        assert flow.request_header("mcp-protocol-version") == "2025-11-25"
    assert rest[-1].method == "DELETE" and rest[-1].status == 200
    (call,) = run.calls("slow_report")
    progress = [m["params"]["progress"] for m in call.messages if "method" in m]
    assert progress == [1, 2, 3] and "result" in call.messages[-1]


def test_no_finding_and_each_exchange_keeps_its_own_era(run: LabRun, tmp_path: Path) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    assert report["findings"] == []
    assert judge(Expected.from_json(run.expected), report["findings"]).ok
    assert report["summary"]["sessions"] == 2
    timeline = read_timeline([run.directory / "capture"], cache=False)
    rows = {
        row["flow_id"]: row
        for row in timeline.exchanges.select("flow_id", "session_id", "era").collect().to_dicts()
    }
    probe, init = run.flows[0], run.flows[1]
    assert rows[probe.id]["era"] == "2026-07-28"
    assert rows[probe.id]["session_id"].startswith("client:")
    session = f"mcp:{init.response_header('mcp-session-id')}"
    for flow in run.flows[1:]:
        assert rows[flow.id] == {"flow_id": flow.id, "session_id": session, "era": "2025-11-25"}
