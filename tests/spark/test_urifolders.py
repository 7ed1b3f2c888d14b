"""A capture folder named by a URI (analyzer/spark/urifolders.py) is read a file a task, each
file by Spark, and gives the default engine's findings, counts and report, and what the folder
read as one task gives."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import read_timeline
from analyzer.spark import spark_findings
from analyzer.spark.files import read_folders
from analyzer.spark.inputs import list_inputs
from analyzer.spark.tasks import Options
from analyzer.spark.urifolders import file_contents
from tests.support.engines import assert_same_results
from tests.support.rotated import write_rotated

ROOT = Path(__file__).resolve().parents[2]
# Each case runs the three stages' many small Spark jobs: minutes on a loaded two-core machine.
pytestmark = pytest.mark.timeout(600)


def assert_uri_split_like_default(folder: Path) -> Any:
    """Spark on `folder` named by a `file:` URI (split by file), then the default engine on
    the folder by path: the same findings (but the input's name in their texts), counts and
    report (but the names of the input and its files)."""
    result = spark_findings([folder.as_uri()], cache=False)
    timeline = read_timeline([folder], cache=False)
    (read,) = result.inputs
    assert read.path.startswith("file:") and all(f.startswith("file:") for f in read.files)
    assert [Path(f).name for f in read.files] == [Path(f).name for f in timeline.inputs[0].files]
    by_path = pl.col("title", "detail").str.replace_all(read.path, str(folder), literal=True)
    found = result.findings.with_columns(by_path)
    assert_same_results(replace(result, findings=found), timeline, named=False)
    return result


def test_a_uri_folder_is_split_by_file_and_reads_as_one_task_and_as_the_default_engine(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_rotated(tmp_path / "capture")
    split = assert_uri_split_like_default(folder)
    assert {"capture-health", "duplicate-event-id"} <= set(split.findings["detector"].to_list())
    # The same folder read as one task (its files staged together): the same result, names too.
    monkeypatch.setattr("analyzer.spark.engine.by_file", lambda one: False)
    whole = spark_findings([folder.as_uri()], cache=False)
    assert_frame_equal(whole.findings, split.findings)
    assert (whole.inputs, whole.counts) == (split.inputs, split.counts)


def test_a_uri_folder_is_read_a_task_a_file(spark: Any, tmp_path: Path) -> None:
    """Each file of the folder is its own partition in both jobs that read files: its flows
    listed by one task, read by one task (one `part` row a task)."""
    folder = write_rotated(tmp_path / "capture")
    (one,) = list_inputs(spark, [folder.as_uri()])
    uris = [f.uri for f in one.files]
    assert len(uris) == 3
    per_task = file_contents(spark, uris).rdd.glom().map(len).collect()
    assert per_task == [1, 1, 1]
    rows, held, planned = read_folders(spark, {}, {0: one}, Options(cache=False))
    try:
        assert [Path(f.path).name for f in planned[0].files] == [Path(u).name for u in uris]
        read = held[-1]
        parts = read.filter("table = 'part'").rdd.glom().map(len).collect()
        assert sorted(n for n in parts if n) == [1, 1, 1]
        # And the crossing flows read whole: hashed into a task or two (local[2]).
        assert rows.filter("table = 'part'").count() - 3 in (1, 2)
    finally:
        for frame in held:
            frame.unpersist()


def test_a_synthetic_uri_folder_gives_the_default_engines_findings(
    spark: Any, tmp_path: Path
) -> None:
    out = tmp_path / "capture"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(out), "--events", "6000",
         "--rotate", "1500", "--per-session", "150", "--seed", "3", "--get-resumes", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    assert len(list(out.glob("*.jsonl"))) >= 4
    assert_uri_split_like_default(out)
