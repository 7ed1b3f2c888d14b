"""clean-stateless-shared-host: two official clients of one host against one stateless server."""

from __future__ import annotations

from collections import Counter
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
    return lab_runs.load("clean-stateless-shared-host")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_two_clients_interleaved_from_one_address_without_sessions(run: LabRun) -> None:
    flows = run.flows
    assert all(f.method == "POST" and f.response_header("mcp-session-id") is None for f in flows)
    assert {f.request["client"].rpartition(":")[0] for f in flows} == {"127.0.0.1"}
    methods = [f.rpc_method for f in flows if f.rpc_method != "notifications/initialized"]
    # Each step of one client, then the same step of the other.
    assert methods == ["initialize"] * 2 + ["tools/list"] * 2 + ["tools/call"] * 4
    ids = Counter(str(f.body["id"]) for f in flows if f.body is not None and "id" in f.body)
    assert sorted(ids.values()) == [2, 2, 2, 2]  # both clients count their ids alike


def test_no_finding_though_ids_recur_in_one_session_key(run: LabRun, tmp_path: Path) -> None:
    report = analyze_report(run, tmp_path / "report.json")
    assert report["findings"] == []
    assert judge(Expected.from_json(run.expected), report["findings"]).ok
    timeline = read_timeline([run.directory / "capture"], cache=False)
    later = timeline.exchanges.filter(pl.col("rpc_method") != "initialize")
    keyed = later.group_by("session_id", "rpc_id").agg(pl.len()).collect()
    # The second initialize starts the key both clients' later requests fall under.
    assert keyed.filter(pl.col("rpc_id").is_not_null())["len"].max() == 2
    calls = timeline.tool_calls.select("first_outcome", "result_delivered").collect()
    assert calls.to_dicts() == [{"first_outcome": "delivered", "result_delivered": True}] * 4
