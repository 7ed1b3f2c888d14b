"""A capture folder read a file a task (analyzer/spark/files.py) gives the default engine's
findings, summary and input report, its flows crossing the file edges included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from analyzer.cli import main as seamwatch
from analyzer.spark import spark_findings
from analyzer.spark.files import plan_folder
from analyzer.spark.tasks import Options
from tests.support.engines import assert_same_results
from tests.support.rotated import write_rotated

ROOT = Path(__file__).resolve().parents[2]
# Each case runs the three stages' many small Spark jobs: minutes on a loaded two-core machine.
pytestmark = pytest.mark.timeout(600)


def assert_split_like_default(folder: Path) -> pl.DataFrame:
    """Spark first, neither engine's cache used (the folder split by file), then the default."""
    planned = plan_folder(0, str(folder), Options(cache=False))
    assert planned is not None and len(planned.files) >= 3
    result = spark_findings([folder], cache=False)
    return assert_same_results(result, read_timeline([folder], cache=False))


def test_flows_crossing_file_edges(spark: Any, tmp_path: Path) -> None:
    folder = write_rotated(tmp_path / "capture")
    found = assert_split_like_default(folder)
    assert {"capture-health", "duplicate-event-id"} <= set(found["detector"].to_list())


@pytest.mark.parametrize("options", [("--counter-ids", "--get-resumes", "2"), ()])
def test_synthetic_rotated_capture(spark: Any, tmp_path: Path, options: tuple[str, ...]) -> None:
    out = tmp_path / "capture"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(out), "--events", "6000",
         "--rotate", "1500", "--per-session", "150", "--seed", "3", *options],
        check=True, capture_output=True,
    )  # fmt: skip
    assert_split_like_default(out)


def test_a_folder_without_records_is_one_line_and_exit_2(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "capture"
    folder.mkdir()
    for index in range(2):
        (folder / f"capture-{index:04d}.jsonl").write_bytes(b"not a record\n")
    argv = ["analyze", str(folder), "--engine", "spark", "--no-cache"]
    assert seamwatch([*argv, "--out", str(tmp_path / "r.json")]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [f"seamwatch: no capture records in {folder}"]
