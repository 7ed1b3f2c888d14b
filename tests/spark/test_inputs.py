"""Inputs named by URI, read through Spark's file system (analyzer/spark/inputs.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import read_timeline
from analyzer.detectors import run_detectors
from analyzer.ingest import UnreadableInput
from analyzer.spark import spark_findings
from analyzer.spark.cache import is_uri
from analyzer.spark.inputs import list_inputs

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "dashboard" / "round-robin-replicas" / "capture"


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("file:/data/capture", True),
        ("hdfs://nn:8020/captures/day=1/", True),
        ("s3a://bucket/replica-*/", True),
        ("capture/", False),
        ("/data/capture", False),
        ("C:/data/capture", False),  # a drive letter, not a scheme
    ],
)
def test_a_uri_is_told_from_a_path(path: str, uri: bool) -> None:
    assert is_uri(path) is uri


@pytest.fixture
def replicas(tmp_path: Path) -> list[Path]:
    """Two capture folders: the lab's round-robin capture and a synthetic one rotated into
    several files (flows continue from one file into the next)."""
    first = tmp_path / "replica-a"
    shutil.copytree(FIXTURE, first)
    second = tmp_path / "replica-b"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(second),
         "--events", "4000", "--rotate", "1500", "--get-resumes", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    assert len(list(second.glob("*.jsonl"))) >= 3
    return [first, second]


@pytest.mark.timeout(600)
def test_a_glob_of_folder_uris_gives_the_findings_of_the_folders(
    spark: Any, replicas: list[Path]
) -> None:
    timeline = read_timeline(replicas, cache=False)
    expected = run_detectors(timeline)
    glob = replicas[0].parent.as_uri() + "/replica-*"
    result = spark_findings([glob], cache=False)
    assert_frame_equal(result.findings, expected)
    assert expected.height > 0
    assert [r.path for r in result.inputs] == [p.as_uri().replace("file:///", "file:/")
                                               for p in replicas]  # fmt: skip
    by_default = [(r.records, r.skipped, dict(r.counts)) for r in timeline.inputs]
    assert [(r.records, r.skipped, dict(r.counts)) for r in result.inputs] == by_default
    assert all(f.startswith("file:/") for r in result.inputs for f in r.files)
    assert len(result.inputs[1].files) == len(timeline.inputs[1].files)


@pytest.mark.timeout(600)
def test_a_file_uri_is_read_and_cached_where_told(spark: Any, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(FIXTURE, capture)
    (single,) = capture.glob("*.jsonl")
    expected = run_detectors(read_timeline([single], cache=False))
    cache = tmp_path / "cache"
    first = spark_findings([single.as_uri()], cache_dir=cache.as_uri())
    second = spark_findings([single.as_uri()], cache_dir=cache.as_uri())
    assert (first.cached, second.cached) == (False, True)
    assert_frame_equal(second.findings, expected)
    assert second.inputs == first.inputs


def test_a_uri_that_names_nothing_is_unreadable(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="no such file"):
        list_inputs(spark, [(tmp_path / "none-*").as_uri()])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnreadableInput, match="no capture files"):
        list_inputs(spark, [(tmp_path / "empty").as_uri()])
