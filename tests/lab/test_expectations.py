"""Every lab scenario, analyzed by `seamwatch analyze`, gives what its expected.json says.

The lab runs once for the module (about 5 s a scenario), into a temporary directory; each
scenario is then its own test case, so a report names the scenario whose findings differ. The
comparison is `lab.verdict.judge` (its rules are in that module's docstring): every required
detector found with the expected evidence ids, each `any_of` group met, nothing else at medium
or higher, and on clean scenarios no resumption finding at any severity.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from analyzer.cli import main as seamwatch
from analyzer.detectors import DETECTORS
from lab import ts
from lab.framework import Expected, LabError, run_scenario
from lab.scenarios import SCENARIOS
from lab.verdict import judge
from tests.support.lab_capture import requires_proxy

# The module fixture runs the whole lab inside the first test's timeout (npm ci included when
# the TypeScript SDK is missing).
pytestmark = [requires_proxy, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class Ran:
    """A scenario's directory, or why it could not run."""

    directory: Path | None
    error: str | None = None


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    out = tmp_path_factory.mktemp("lab")
    # If this fails, the TypeScript scenario fails below with the command to run.
    with contextlib.suppress(LabError):
        ts.ensure_installed()
    ran: dict[str, Ran] = {}
    for scenario in SCENARIOS:
        try:
            ran[scenario.name] = Ran(run_scenario(scenario, out))
        except LabError as exc:
            ran[scenario.name] = Ran(None, " ".join(str(exc).split()))
    return ran


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
def test_findings_match_expected(name: str, lab: dict[str, Ran], tmp_path: Path) -> None:
    ran = lab[name]
    if ran.directory is None:
        pytest.fail(f"{name} did not run: {ran.error}")
    expected = Expected.load(ran.directory / "expected.json")
    findings = analyze(ran.directory / "capture", tmp_path / "report.json")
    verdict = judge(expected, findings, registered=[det.id for det in DETECTORS])
    assert verdict.ok, f"{name}: {verdict.text()}\nfindings:\n{_listing(findings)}"
