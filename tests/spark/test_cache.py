"""The Spark engine's cache, bucketed by session-key hash (analyzer/spark/cache.py)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import read_timeline
from analyzer.detectors import run_detectors
from analyzer.spark import spark_findings, tasks
from analyzer.spark.cache import IN_USE_S, default_location, inputs_id

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "dashboard" / "round-robin-replicas" / "capture"


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("spark-*"))


# Three runs of the engine: on a shared machine each takes up to a minute.
@pytest.mark.timeout(600)
def test_a_second_run_reads_the_bucketed_rows_and_a_changed_input_is_parsed_again(
    spark: Any, tmp_path: Path
) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(FIXTURE, capture)
    cache = tmp_path / "cache"
    expected = run_detectors(read_timeline([capture], cache=False))
    first = spark_findings([capture], cache_dir=cache.as_uri())
    assert not first.cached
    (entry,) = entries(cache)
    # Spark's bucket files: part-<task>-<uuid>_<bucket>.c000.snappy.parquet
    assert any(p.name.endswith(".c000.snappy.parquet") for p in (entry / "records").iterdir())
    second = spark_findings([capture], cache_dir=cache.as_uri())
    assert second.cached
    assert_frame_equal(second.findings, expected)
    assert_frame_equal(first.findings, expected)
    assert second.inputs == first.inputs and second.counts == first.counts
    # A rotated file added to the capture: another key, parsed again, its findings.
    newest = sorted(capture.glob("*.jsonl"))[-1]
    os.utime(newest, ns=(newest.stat().st_atime_ns, newest.stat().st_mtime_ns + 10**9))
    third = spark_findings([capture], cache_dir=cache.as_uri())
    assert not third.cached
    assert len(entries(cache)) == 2
    assert_frame_equal(third.findings, expected)


def test_without_the_cache_nothing_is_written(spark: Any, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(FIXTURE, capture)
    result = spark_findings([capture], cache=False, cache_dir=(tmp_path / "c").as_uri())
    assert not result.cached
    assert not (tmp_path / "c").exists()


def test_the_cache_lives_beside_the_first_input_in_local_mode_only(tmp_path: Path) -> None:
    beside = (tmp_path / ".seamwatch-cache").as_uri()
    assert default_location("local[2]", [str(tmp_path)]) == beside
    assert default_location("local[*]", [str(tmp_path / "a.har")]) == beside
    assert default_location("spark://head:7077", [str(tmp_path)]) is None
    assert default_location("local[2]", ["hdfs://nn/captures/"]) is None


def test_a_task_given_two_buckets_refuses_them() -> None:
    rows = pa.RecordBatch.from_pylist(
        [{"group": "a", "bucket": 0}, {"group": "b", "bucket": 1}],
    )
    with pytest.raises(ValueError, match="two buckets"):
        list(tasks.analyze_bucket(iter([rows]), tasks.Options()))
    assert list(tasks.analyze_bucket(iter([]), tasks.Options())) == []


def fake_entry(cache: Path, inputs: str, key: str, *, complete: bool, age_s: float) -> Path:
    """An entry folder as a run leaves it: used `age_s` ago, its reports written or not."""
    entry = cache / f"spark-{inputs}-{key}"
    (entry / "records").mkdir(parents=True)
    if complete:
        (entry / "reports").mkdir()
        (entry / "reports" / "_SUCCESS").write_bytes(b"")
    used = entry / "last-used"
    used.write_text("{}")
    when = time.time() - age_s
    os.utime(used, (when, when))
    return entry


@pytest.mark.timeout(600)
def test_a_run_prunes_older_entries_of_its_inputs_only(spark: Any, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(FIXTURE, capture)
    cache = tmp_path / "cache"
    ours = inputs_id([capture.resolve().as_uri()])
    day = 24 * 3600.0
    oldest = fake_entry(cache, ours, "0" * 16, complete=True, age_s=3 * day)
    older = fake_entry(cache, ours, "1" * 16, complete=True, age_s=2 * day)
    stale = fake_entry(cache, ours, "2" * 16, complete=False, age_s=IN_USE_S + 60)
    # Another run on the same inputs (other options) writing its entry right now.
    writing = fake_entry(cache, ours, "3" * 16, complete=False, age_s=60)
    theirs = fake_entry(cache, inputs_id(["file:/elsewhere"]), "4" * 16, complete=True,
                        age_s=9 * day)  # fmt: skip
    first = spark_findings([capture], cache_dir=cache.as_uri())
    assert not first.cached
    (new,) = set(entries(cache)) - {oldest, older, stale, writing, theirs}
    assert new.name.startswith(f"spark-{ours}-")
    assert (new / "reports" / "_SUCCESS").is_file()
    # Kept: the new entry and the most recently used older complete one (KEEP 2), the one
    # being written, the other inputs'. Removed: the oldest, the stale incomplete one.
    assert entries(cache) == sorted([new, older, writing, theirs])
    # The next run reads the new entry; the older one is still within KEEP.
    second = spark_findings([capture], cache_dir=cache.as_uri())
    assert second.cached
    assert_frame_equal(second.findings, first.findings)
    assert entries(cache) == sorted([new, older, writing, theirs])
