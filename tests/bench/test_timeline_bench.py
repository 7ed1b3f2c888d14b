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


def test_a_first_analysis_and_its_ratio_to_the_decoding_floor(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    synth = [sys.executable, str(BENCH / "synth_capture.py"), str(capture), "--events", "2000"]
    subprocess.run(synth, check=True, capture_output=True)
    bench = [sys.executable, str(BENCH / "timeline_bench.py"), str(capture)]
    bench += ["--phases", "decode,first", "--repeat", "2"]
    out = subprocess.run(bench, check=True, capture_output=True, text=True).stdout.splitlines()
    runs = [line.split() for line in out if line.split()[1:3] and line.split()[2] == "events"]
    assert [run[0] for run in runs] == ["decode", "first"] * 2  # in turn, round by round
    assert {run[1] for run in runs} == {runs[0][1]}  # the same events counted by both
    assert int(runs[0][1].replace(",", "")) >= 2000
    assert not (capture / ".seamwatch-cache").exists()  # a first analysis writes no cache
    ratio = next(line for line in out if line.startswith("first") and "x decode" in line)
    assert float(ratio.split("x decode")[0].split()[-1]) > 0


def test_phases_are_checked(tmp_path: Path) -> None:
    bench = [sys.executable, str(BENCH / "timeline_bench.py"), str(tmp_path), "--phases", "nope"]
    done = subprocess.run(bench, capture_output=True, text=True)
    assert done.returncode == 2 and "unknown phase(s): nope" in done.stderr


def test_each_stage_of_the_sketch_reads_the_events_the_parse_reads(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    synth = [sys.executable, str(BENCH / "synth_capture.py"), str(capture), "--events", "2000"]
    subprocess.run(synth, check=True, capture_output=True)
    decoded = _phase(capture, "decode")["events"]
    assert decoded >= 2000
    for stage in ("sketch-split", "sketch-fields", "sketch"):
        assert _phase(capture, stage)["events"] == decoded, stage
    chunks = sum(
        line.count(b'"kind":"chunk"')
        for file in capture.glob("*.jsonl")
        for line in file.open("rb")
    )
    assert _phase(capture, "sketch-read")["events"] == chunks > 0  # it counts records
