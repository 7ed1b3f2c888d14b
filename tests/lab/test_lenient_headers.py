"""lenient-headers: a 2026-07-28 server executes a tools/call whose Mcp-Name disagrees."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed
from tests.support.lab_findings import analyze_run, of, verdict_of

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("lenient-headers")


@pytest.fixture(scope="module")
def findings(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return analyze_run(run, tmp_path_factory.mktemp("report") / "report.json")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    _, mismatched = run.notes["request_ids"]
    assert run.expected["required"] == ["header-mismatch"]
    assert run.expected["evidence"] == {"request_ids": [json.dumps(mismatched)]}


def test_sessionless_2026_traffic(run: LabRun) -> None:
    assert [f.rpc_method for f in run.flows] == [
        "server/discover",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    for flow in run.flows:
        assert flow.method == "POST" and flow.status == 200
        assert flow.request_header("mcp-protocol-version") == "2026-07-28"
        assert flow.request_header("mcp-method") == flow.rpc_method
        assert flow.request_header("mcp-session-id") is None
        assert flow.response_header("mcp-session-id") is None
        assert flow.response_header("content-type") == "application/json"
    assert run.notes["supported_versions"] == ["2026-07-28"]


def test_the_mismatched_call_was_executed_as_the_body_says(run: LabRun) -> None:
    agreeing, mismatched = [f for f in run.flows if f.rpc_method == "tools/call"]
    assert agreeing.tool == agreeing.request_header("mcp-name") == "lookup"
    assert mismatched.tool == "delete_ticket"
    assert mismatched.request_header("mcp-name") == "lookup"
    (answer,) = mismatched.messages
    assert answer["result"]["content"][0]["text"] == "deleted ticket T-7"
    assert run.notes["deleted"] == ["T-7"]
    assert [(c["tool"], c["mcp_name"]) for c in run.notes["executed"]] == [
        ("lookup", "lookup"),
        ("delete_ticket", "lookup"),
    ]


def test_header_mismatch_flags_only_the_mismatched_call(
    run: LabRun, findings: list[dict[str, Any]]
) -> None:
    (found,) = of(findings, "header-mismatch")
    _, mismatched = [f for f in run.flows if f.rpc_method == "tools/call"]
    assert found["severity"] == "medium"
    assert found["era"] == "2026-07-28"
    assert found["request_ids"] == ["4"]
    assert found["flow_ids"] == [mismatched.id]
    assert "header lookup != body delete_ticket" in found["detail"]
    verdict = verdict_of(run, findings)
    assert verdict.ok, verdict.text()
    assert set(verdict.found) <= {"header-mismatch", "capture-health"}
