"""Every lab scenario, analyzed by `seamwatch analyze`, gives what its expected.json says.

Each scenario runs once for the test session (about 5 s a scenario; the scenario's own test
module reads the same run) and is its own test case, so a report names the scenario whose
findings differ. The comparison is `lab.verdict.judge` (its rules are in that module's
docstring): every required detector found with the expected evidence ids, each `any_of` group
met, nothing else at medium or higher, and on clean scenarios no resumption finding at any
severity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analyzer.cli import main as seamwatch
from analyzer.detectors import DETECTORS
from lab.framework import Expected, LabError
from lab.scenarios import SCENARIOS
from lab.verdict import judge
from tests.support.lab_capture import LabRuns

# A scenario's first asker runs it (the TypeScript SDK's `npm ci` too when it is missing).
pytestmark = [pytest.mark.timeout(600)]


def analyze(capture: Path, report: Path) -> list[dict[str, Any]]:
    """The findings of `seamwatch analyze CAPTURE --format json` (run in this process)."""
    argv = ["analyze", str(capture), "--format", "json", "--fail-on", "none", "--no-cache"]
    code = seamwatch([*argv, "--out", str(report)])
    assert code == 0, f"seamwatch analyze exited {code}"
    findings: list[dict[str, Any]] = json.loads(report.read_text(encoding="utf-8"))["findings"]
    return findings


def _listing(findings: list[dict[str, Any]]) -> str:
    lines = []
    for f in findings:
        evidence = {k: f[k] for k in ("event_ids", "request_ids") if f[k]}
        lines.append(f"  {f['severity']:<6} {f['detector']}: {f['title']} {evidence or ''}")
    return "\n".join(lines) or "  (none)"


@pytest.mark.parametrize("name", [scenario.name for scenario in SCENARIOS])
def test_findings_match_expected(name: str, lab_runs: LabRuns, tmp_path: Path) -> None:
    try:
        directory = lab_runs.directory(name)
    except LabError as exc:
        pytest.fail(f"{name} did not run: {' '.join(str(exc).split())}")
    expected = Expected.load(directory / "expected.json")
    findings = analyze(directory / "capture", tmp_path / "report.json")
    verdict = judge(expected, findings, registered=[det.id for det in DETECTORS])
    assert verdict.ok, f"{name}: {verdict.text()}\nfindings:\n{_listing(findings)}"
