"""The Spark engine's Parquet cache: the ingest stage's rows, bucketed by session-key hash.

The first stage's rows (`analyzer.spark.tasks.RECORDS`: the normalized tables of each flow
group, every flow of a session in one group) are written as a Spark bucketed table: Parquet
files `part-<task>-..._<bucket>.c000.parquet`, where a group's bucket is Spark's own hash of it
(Murmur3, as a `CLUSTERED BY (group) INTO n BUCKETS` table). A bucketed scan reads one bucket a
task, so the second stage gets whole sessions without a shuffle, on the run that writes the
cache and on every later one, which skips the parse as well.

Layout, under the cache location (`--cache-dir URI`; in local mode, by default, the
`.seamwatch-cache/` folder beside the first input, as the default engine's cache):

    spark-<inputs 16>-<key 16>/last-used  written when a run starts to read or write the entry
    spark-<inputs 16>-<key 16>/records/   the bucketed table (`_SUCCESS`: Spark's commit marker)
    spark-<inputs 16>-<key 16>/reports/   the inputs' reports (JSON), written last: complete

`<inputs>` hashes the inputs' URIs (`inputs_id`): the entries of the same inputs share it. The
key hashes, as the default engine's (`analyzer.cache`), every input file's name, size and
modification time, the source of the code that normalizes with the Polars version (and of the
tasks that lay the rows out), the options that change normalization, and the bucket count; an
entry of another key is never read. After a run, `prune` removes the entries of the same inputs
under other keys (files, code or options changed since) but the `KEEP` most recently used
complete ones, and never one used within `IN_USE_S`: another run may be writing it (it is not
complete yet) or reading it. A shared cache location holds the entries of many input sets
(other days, other fleets): those of other inputs are never touched.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlparse
from urllib.request import url2pathname

import polars as pl

from analyzer.cache import CACHE_DIR, NORMALIZING_CODE
from analyzer.ingest import InputReport
from analyzer.records import SCHEMA
from analyzer.spark import tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "IN_USE_S",
    "KEEP",
    "LAYOUT",
    "InputFile",
    "SparkCache",
    "code_digest",
    "default_location",
    "entry_key",
    "inputs_id",
    "is_uri",
]

#: The entry's own layout, in the key (1: records bucketed by group, reports beside them).
LAYOUT: Final = 1
#: Complete entries of the same inputs kept by `prune`, the one a run used among them: a run
#: after a code or option change, and the one before it (a rollback, or two option sets in turn).
KEEP: Final = 2
#: An entry used (its writing or reading started) within this many seconds may be in use by
#: another run, and stays. Longer than the default engine's hour for its staging folders: a
#: run over a fleet's day may write its entry for hours (docs/spark.md, sizing).
IN_USE_S: Final = 6 * 3600
_USED: Final = "last-used"
_ANALYZER = Path(__file__).resolve().parents[1]
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def is_uri(path: str) -> bool:
    """Whether a path names a URI (`file:/x`, `hdfs://nn/x`), not a local path (a one-letter
    scheme is a Windows drive)."""
    return _SCHEME.match(path) is not None


@cache
def code_digest() -> str:
    """SHA-256 of the Polars version and the source of the code that decides the rows: the
    normalizing modules (`NORMALIZING_CODE`) and this engine's tasks."""
    digest = hashlib.sha256(pl.__version__.encode())
    for name in (*NORMALIZING_CODE, "spark/tasks.py"):
        digest.update(name.encode())
        digest.update((_ANALYZER / name).read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class InputFile:
    """A file an input names, as listed (`analyzer.spark.inputs`): its URI, size, mtime."""

    input: int
    uri: str
    size: int
    mtime: int


def inputs_id(uris: Sequence[str]) -> str:
    """What names the entries of the same inputs (their URIs, in any order)."""
    text = json.dumps(sorted(set(uris)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_key(
    files: Sequence[InputFile], options: tasks.Options, buckets: int, skipped: Sequence[int]
) -> str:
    """The key of the entry holding these inputs' rows."""
    ingredients = {
        "code": code_digest(),
        "layout": LAYOUT,
        "capture_schema": SCHEMA,
        "files": [[f.input, f.uri, f.size, f.mtime] for f in files],
        "skipped": sorted(skipped),
        "replica_header": options.replica_header.lower() if options.replica_header else None,
        "client_header": options.client_header.lower() if options.client_header else None,
        "buckets": buckets,
    }
    text = json.dumps(ingredients, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_location(master: str, paths: Sequence[str]) -> str | None:
    """Where the cache lives without `--cache-dir`: in local mode, the `.seamwatch-cache/`
    folder beside the first input when that is a local path; else none (a cluster's
    executors cannot write beside a driver's file, and an object store's prefix is the
    operator's to choose)."""
    if not master.startswith("local") or not paths or is_uri(paths[0]):
        return None
    first = Path(paths[0])
    folder = first if first.is_dir() else first.parent
    return (folder / CACHE_DIR).resolve().as_uri()


@dataclass(frozen=True)
class SparkCache:
    """One entry of the cache: `location`/spark-`inputs`-`key`."""

    location: str
    inputs: str
    key: str
    buckets: int

    @property
    def name(self) -> str:
        return f"spark-{self.inputs}-{self.key}"

    @property
    def root(self) -> str:
        return f"{self.location.rstrip('/')}/{self.name}"

    def touch(self, spark: SparkSession, uris: Sequence[str]) -> None:
        """Mark the entry used now (`last-used`, naming its inputs), before it is read or
        written: `prune` leaves it to this run."""
        if self.location.startswith("file:"):
            _private_folder(self.location)
        fs, path = _file_system(spark, f"{self.root}/{_USED}")
        out = fs.create(path, True)
        try:
            out.write(json.dumps({"inputs": sorted(set(uris))}).encode())
        finally:
            out.close()

    def prune(self, spark: SparkSession, *, now: float | None = None) -> list[str]:
        """Remove the entries of the same inputs under other keys but the `KEEP` most recently
        used complete ones (this one among them) and those used within `IN_USE_S`; the
        removed entries' URIs."""
        fs, pattern = _file_system(spark, f"{self.location.rstrip('/')}/spark-{self.inputs}-*")
        now = time.time() if now is None else now
        others = []
        for status in fs.globStatus(pattern) or []:
            entry = status.getPath()
            if not status.isDirectory() or str(entry.getName()) == self.name:
                continue
            used = _used_at(fs, entry, status)
            complete = bool(fs.exists(entry.suffix("/reports/_SUCCESS")))
            others.append((used, complete, entry))
        kept = KEEP - 1  # this entry is one of them
        removed = []
        for used, complete, entry in sorted(others, key=lambda o: -o[0]):
            if complete and kept > 0:
                kept -= 1
                continue
            if now - used < IN_USE_S:
                continue
            fs.delete(entry, True)
            removed.append(str(entry.toString()))
        return removed

    def _table(self) -> str:
        return f"seamwatch_records_{self.key}"

    def complete(self, spark: SparkSession) -> bool:
        """Whether the entry was written whole (its reports, written last, committed)."""
        return _exists(spark, f"{self.root}/reports/_SUCCESS")

    def write(
        self, spark: SparkSession, records: DataFrame, reports: Mapping[int, InputReport]
    ) -> None:
        """Write the rows bucketed by group (no shuffle: each task writes a file a bucket),
        then the reports of the inputs read, by index."""
        if self.location.startswith("file:"):
            _private_folder(self.location)
        (
            records.write.mode("overwrite")
            .bucketBy(self.buckets, "group")
            .option("path", f"{self.root}/records")
            .saveAsTable(self._table())
        )
        rows = [(i, json.dumps(asdict(r))) for i, r in reports.items()]
        spark.createDataFrame(rows, "input int, report string").coalesce(1).write.mode(
            "overwrite"
        ).parquet(f"{self.root}/reports")

    def records(self, spark: SparkSession) -> DataFrame:
        """The rows, a bucket a partition (a bucketed scan of the table)."""
        spark.sql(f"DROP TABLE IF EXISTS {self._table()}")
        spark.sql(
            f"CREATE TABLE {self._table()} ({tasks.RECORDS_DDL.replace('group', '`group`', 1)}) "
            f"USING parquet CLUSTERED BY (`group`) INTO {self.buckets} BUCKETS "
            f"LOCATION '{self.root}/records'"
        )
        return spark.table(self._table())

    def reports(self, spark: SparkSession) -> dict[int, InputReport]:
        """The reports of the inputs read, by index."""
        rows = spark.read.parquet(f"{self.root}/reports").collect()
        return {int(r["input"]): tasks.report_of(str(r["report"]).encode()) for r in rows}


def _exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _file_system(spark, uri)
    return bool(fs.exists(path))


def _file_system(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """Hadoop's file system of `uri` and its `Path` (the JVM's objects)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def _used_at(fs: Any, entry: Any, status: Any) -> float:
    """When an entry's use last started (seconds): its `last-used` file's modification time,
    else the folder's own (an object store's folders have none: 0, long ago)."""
    marker = entry.suffix(f"/{_USED}")
    if fs.exists(marker):
        return int(fs.getFileStatus(marker).getModificationTime()) / 1000
    return int(status.getModificationTime()) / 1000


def _private_folder(location: str) -> None:
    """A local cache folder is made 0700, as the default engine's (what others could write
    into, they could forge)."""
    folder = Path(url2pathname(urlparse(location).path))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
