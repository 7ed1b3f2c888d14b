"""bench/detector_bench.py: every detector timed on a small synthetic capture, from the cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from analyzer.cli import main as seamwatch
from analyzer.detectors import ANALYSIS_ERROR, DETECTORS

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_prints_the_load_and_each_detector_once(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    synth = [sys.executable, str(BENCH / "synth_capture.py"), str(capture), "--events", "3000"]
    subprocess.run(synth, check=True, capture_output=True)
    argv = ["analyze", str(capture), "--format", "json", "--fail-on", "none"]
    assert seamwatch([*argv, "--out", str(tmp_path / "report.json")]) == 0  # stores the frames
    bench = [sys.executable, str(BENCH / "detector_bench.py"), str(capture), "--rounds", "2"]
    lines = subprocess.run(bench, check=True, capture_output=True, text=True).stdout.splitlines()
    named = [line.split()[0] for line in lines[1:-2]]
    assert lines[0].startswith("load (from the cache)")
    assert sorted(named) == sorted(d.id for d in DETECTORS if d.id != ANALYSIS_ERROR)
    seconds = [float(line.split()[1]) for line in lines[1:-2]]
    assert seconds == sorted(seconds, reverse=True)  # slowest first
    assert lines[-2].startswith("detectors (sum of medians)")
    assert lines[-1].startswith("peak RSS") and "2 round(s)" in lines[-1]


def test_only_times_the_named_detectors(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    synth = [sys.executable, str(BENCH / "synth_capture.py"), str(capture), "--events", "1000"]
    subprocess.run(synth, check=True, capture_output=True)
    bench = [sys.executable, str(BENCH / "detector_bench.py"), str(capture), "--rounds", "1"]
    done = subprocess.run(
        [*bench, "--only", "lost-response,causal-gap"], check=True, capture_output=True, text=True
    )
    named = sorted(line.split()[0] for line in done.stdout.splitlines()[1:-2])
    assert named == ["causal-gap", "lost-response"]
