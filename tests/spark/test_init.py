"""The Spark engine gives the default engine's findings, summary and inputs (analyzer/spark).

Each case runs both engines on the same input: synthetic captures with every option of
`bench/synth_capture.py` (20k events; `SEAMWATCH_SPARK_EVENTS=1000000` for the 1M check) and the
lab's captures, whose scenarios plant every fault the detectors know.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from analyzer.cli import main as seamwatch
from analyzer.spark import spark_findings
from lab.scenarios import SCENARIOS
from tests.support.engines import assert_same_results
from tests.support.lab_capture import LabRuns

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "dashboard" / "round-robin-replicas"
EVENTS = int(os.environ.get("SEAMWATCH_SPARK_EVENTS", "20000"))

SYNTH_OPTIONS = {
    "plain": (),
    "counter-ids": ("--counter-ids",),
    "get-resumes": ("--get-resumes", "3"),
    "all": ("--counter-ids", "--get-resumes", "2", "--per-session", "150", "--rotate", "9000",
            "--seed", "5"),
}  # fmt: skip


def assert_same_analysis(paths: list[Path]) -> pl.DataFrame:
    """Both engines on `paths` (the cache filled by the first): equal findings, counts, inputs."""
    timeline = read_timeline(paths)
    return assert_same_results(spark_findings(paths), timeline)


@pytest.mark.parametrize("options", SYNTH_OPTIONS.values(), ids=SYNTH_OPTIONS.keys())
def test_synthetic_captures(spark: Any, tmp_path: Path, options: tuple[str, ...]) -> None:
    out = tmp_path / "capture"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(out),
         "--events", str(EVENTS), *options],
        check=True, capture_output=True,
    )  # fmt: skip
    assert_same_analysis([out])


# The scenarios whose faults relate sessions (a cursor carried into a new session, an event
# store shared by sessions, a resume on another replica) and two clean ones.
CROSSING = ("legacy-cursor-carryover", "shared-event-store", "round-robin-replicas")
CLEAN = ("clean-resume", "clean-stateless")


@pytest.fixture(scope="module")
def lab_captures(lab_runs: LabRuns) -> list[Path]:
    """The capture folders of lab scenarios run on 127.0.0.1: those above, from the test
    session's runs (a scenario another test ran is not run again), or every scenario of a
    `seamwatch lab run --all --out DIR` named by `SEAMWATCH_SPARK_LAB=DIR` (the whole lab takes
    many minutes on a shared machine)."""
    given = os.environ.get("SEAMWATCH_SPARK_LAB")
    if given:
        found = sorted(Path(given).glob("*/capture"))
        assert len(found) == len(SCENARIOS), f"{given} holds {len(found)} lab captures"
        return found
    chosen = [s.name for s in SCENARIOS if s.name in CROSSING + CLEAN]
    return [lab_runs.directory(name) / "capture" for name in chosen]


def test_lab_captures_merged(lab_captures: list[Path], spark: Any) -> None:
    found = assert_same_analysis(lab_captures)
    assert found["detector"].n_unique() >= 3  # the scenarios' faults, not a clean run


@pytest.mark.parametrize("name", CROSSING)
def test_lab_capture(lab_captures: list[Path], spark: Any, name: str) -> None:
    (capture,) = [path for path in lab_captures if path.parent.name == name]
    assert assert_same_analysis([capture]).height > 0


def report(argv: list[str], out: Path) -> tuple[int, bytes]:
    code = seamwatch([*argv, "--out", str(out)])
    return code, out.read_bytes() if out.exists() else b""


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_the_command_gives_the_same_report_and_exit_code(
    spark: Any, tmp_path: Path, fmt: str
) -> None:
    capture = tmp_path / "round-robin-replicas"
    shutil.copytree(FIXTURE, capture)
    argv = ["analyze", str(capture / "capture"), "--format", fmt]
    default = report(argv, tmp_path / f"default.{fmt}")
    assert default[0] == 1  # its findings fail the run (--fail-on medium)
    assert report([*argv, "--engine", "spark"], tmp_path / f"spark.{fmt}") == default


def test_otlp_needs_the_default_engine(spark: Any, tmp_path: Path) -> None:
    argv = ["analyze", str(FIXTURE / "capture"), "--format", "otlp-json", "--engine", "spark"]
    assert seamwatch([*argv, "--no-cache", "--out", str(tmp_path / "t.json")]) == 2
