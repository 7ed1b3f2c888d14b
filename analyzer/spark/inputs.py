"""The Spark engine's inputs: local paths, or any URI Spark reads (`file:`, `hdfs:`, `s3a:`...).

A local path is read by the executor that gets it, by path, as the default engine reads it (in
local mode, or on a cluster whose nodes mount the same file system). A URI is listed on the
driver through Spark's Hadoop file system (a glob gives one input a match, as a shell's glob
gives the default engine; a folder holds the capture files `*.jsonl` and `*.jsonl.partial`),
and its files' bytes are read by Spark (`binaryFile`) and sent to the task that reads the
input: that task writes them to a private scratch folder, under their own names, and runs the
existing reader there. An input is one task: a capture folder's rotated files continue one
another (a flow may start in one file and end in the next; the capture's health, `seq` gaps
and `capture_close`, is judged over the whole run), so they are read together.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from analyzer.ingest import InputReport, UnreadableInput, input_kind
from analyzer.ingest.jsonl import capture_files, is_capture_file
from analyzer.scratch import scratch_prefix
from analyzer.spark import tasks
from analyzer.spark.cache import InputFile, is_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Input", "is_uri", "list_inputs", "read_uri_inputs", "staged_records"]


@dataclass(frozen=True)
class Input:
    """One input: its name (as given, or a glob's match), whether it is a URI and a folder,
    its files."""

    name: str
    uri: bool
    folder: bool
    kind: str  # of a URI, what its name says (its reader tells by its first bytes too)
    files: tuple[InputFile, ...]


def _kind_by_name(name: str, folder: bool) -> str:
    lower = name.lower()
    if lower.endswith(".har") and not folder:
        return "har"
    if lower.endswith((".mitm", ".flows", ".dump")) and not folder:
        return "mitm"
    return "capture"


def list_inputs(spark: SparkSession, paths: Sequence[str]) -> list[Input]:
    """The inputs `paths` name, in order, each with its files (size and modification time)."""
    found: list[Input] = []
    for raw in paths:
        if not is_uri(raw):
            found.append(_local(len(found), raw))
            continue
        for name, folder, files in _listed(spark, raw):
            index = len(found)
            listed = tuple(InputFile(index, *f) for f in files)
            found.append(Input(name, True, folder, _kind_by_name(name, folder), listed))
    return found


def _local(index: int, raw: str) -> Input:
    path = Path(raw)
    kind = input_kind(path)
    files = capture_files(path) if kind == "capture" else [path]
    listed = []
    for file in files:
        st = file.stat()
        listed.append(InputFile(index, file.resolve().as_uri(), st.st_size, st.st_mtime_ns))
    return Input(raw, False, path.is_dir(), kind, tuple(listed))


def _listed(spark: SparkSession, uri: str) -> list[tuple[str, bool, list[tuple[str, int, int]]]]:
    """Each match of `uri` (a glob or not): its name, whether a folder, and its files
    `uri, size, mtime`."""
    context = spark.sparkContext
    jvm = context._jvm
    assert jvm is not None
    pattern = jvm.org.apache.hadoop.fs.Path(uri)
    fs = pattern.getFileSystem(context._jsc.hadoopConfiguration())
    matches = fs.globStatus(pattern)
    if not matches:
        raise UnreadableInput(f"{uri}: no such file or directory")
    out = []
    for match in sorted(matches, key=lambda m: str(m.getPath().toString())):
        name = str(match.getPath().toString())
        if match.isDirectory():
            statuses = [s for s in fs.listStatus(match.getPath()) if s.isFile()]
            statuses = [s for s in statuses if is_capture_file(Path(str(s.getPath().getName())))]
            if not statuses:
                raise UnreadableInput(f"{name}: no capture files (*.jsonl, *.jsonl.partial)")
        else:
            statuses = [match]
        files = [
            (str(s.getPath().toString()), int(s.getLen()), int(s.getModificationTime()))
            for s in sorted(statuses, key=lambda s: str(s.getPath().toString()))
        ]
        out.append((name, bool(match.isDirectory()), files))
    return out


def read_uri_inputs(
    spark: SparkSession, inputs: Mapping[int, Input], options: tasks.Options
) -> DataFrame:
    """Stage 1 of the URI inputs: their files read by Spark, each input's files grouped into
    the task that stages and reads them; `RECORDS` rows."""
    files = [
        (f.uri, index, name)
        for index, one in inputs.items()
        for f, name in zip(one.files, _names(one), strict=True)
    ]
    wanted = spark.createDataFrame(files, "path string, input int, name string")
    content = spark.read.format("binaryFile").load([f[0] for f in files]).select("path", "content")
    names = {index: (one.name, one.folder) for index, one in inputs.items()}

    def read(table: pa.Table) -> pa.Table:
        return staged_records(table, names, options)

    return content.join(wanted, on="path").groupBy("input").applyInArrow(read, tasks.RECORDS_DDL)


def _names(one: Input) -> list[str]:
    """The files' own names (what the readers order rotated files and tell kinds by)."""
    return [f.uri.rstrip("/").rsplit("/", 1)[-1] for f in one.files]


def staged_records(
    table: pa.Table, names: Mapping[int, tuple[str, bool]], options: tasks.Options
) -> pa.Table:
    """`applyInArrow` over one input's files (`path, content, input, name`): written to a
    scratch folder under their own names and read there; `RECORDS` rows, the report naming
    the input and its files as listed."""
    index = int(table["input"][0].as_py())
    name, is_folder = names[index]
    uri_of = dict(zip(table["name"].to_pylist(), table["path"].to_pylist(), strict=True))
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark-input")) as scratch:
        folder = Path(scratch)
        contents = table["content"].to_pylist()
        for file, content in zip(table["name"].to_pylist(), contents, strict=True):
            (folder / file).write_bytes(content)
        local = folder if is_folder else folder / next(iter(uri_of))

        def as_listed(report: InputReport) -> InputReport:
            files = tuple(uri_of.get(Path(f).name, f) for f in report.files)
            return replace(report, path=name, files=files)

        uncached = replace(options, cache=False)
        batches = list(tasks.ingest_one(index, str(local), uncached, as_listed))
    return pa.Table.from_batches(batches, schema=tasks.RECORDS)
