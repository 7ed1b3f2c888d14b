"""bench/timeline_bench.py: the phases count the same events of one capture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _phase(capture: Path, phase: str) -> dict[str, float]:
    bench = [sys.executable, str(BENCH / "timeline_bench.py"), str(capture), "--phase", phase]
    done = subprocess.run(bench, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_decoding_floor_reads_the_events_the_parse_reads(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    synth = [sys.executable, str(BENCH / "synth_capture.py"), str(capture), "--events", "3000"]
    synth += ["--rotate", "1000"]  # several files, shared by the decoding processes
    subprocess.run(synth, check=True, capture_output=True)
    assert len(list(capture.glob("*.jsonl"))) > 2
    parsed, decoded = _phase(capture, "parse"), _phase(capture, "decode")
    assert parsed["events"] >= 3000
    assert decoded["events"] == parsed["events"]
    assert decoded["seconds"] > 0 and decoded["worker_rss_mb"] > 0  # it ran in the workers
