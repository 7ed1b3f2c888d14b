"""bench/synth_reused_ids.py: client runs reusing request ids under one key, analyzed end to end.

Small K (the benchmark runs thousands): the traffic is correct, so no finding; with the first
run's answer withheld, exactly that loss. Each answer answers its own run's request, not the
other runs' with the same id (`analyzer.timeline.answers`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.cli import main as seamwatch

SCRIPT = Path(__file__).resolve().parents[2] / "bench/synth_reused_ids.py"


def _findings(tmp_path: Path, *args: str) -> list[tuple[str, str]]:
    out = tmp_path / "capture"
    subprocess.run([sys.executable, str(SCRIPT), str(out), "--runs", "12", *args], check=True)
    report = tmp_path / "report.json"
    argv = ["analyze", str(out), "--format", "json", "--fail-on", "none", "--no-cache"]
    assert seamwatch([*argv, "--out", str(report)]) == 0
    found = json.loads(report.read_text(encoding="utf-8"))["findings"]
    return sorted((f["detector"], f["severity"]) for f in found)


@pytest.mark.parametrize("args", [(), ("--era", "2025-11-25", "--resume")], ids=["2026", "2025"])
def test_reused_ids_are_clean(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert _findings(tmp_path, *args) == []


def test_the_one_unanswered_run_is_found(tmp_path: Path) -> None:
    found = _findings(tmp_path, "--era", "2025-11-25", "--resume", "--unanswered")
    assert found == [("causal-gap", "high"), ("lost-response", "high")]
