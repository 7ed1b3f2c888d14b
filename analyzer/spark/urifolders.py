"""The first two jobs of a capture folder read a file a task (`analyzer.spark.files`) when the
folder is named by a URI (hdfs:, s3a:, file:).

Its files are read by Spark (`binaryFile`, a file a task: the Python workers have no client of
the cluster's file systems, Spark's JVM has them all, with their credentials and data
locality); the first job also sends each file's first record (what `plan_heads` reads of it),
and the driver plans the folder from those, never reading a file itself. The second job gets
each file's bytes where Spark read them: its plan row (position, crossing flows) is broadcast
to it, so no file's bytes are shuffled.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from analyzer.ingest.flowlines import split_lines
from analyzer.ingest.lines import first_record, head_fields, plan_heads
from analyzer.scratch import scratch_prefix
from analyzer.spark.filetask import FLOWS_DDL, Folder, bases, flow_rows, read_file, skips
from analyzer.spark.inputs import Input
from analyzer.spark.tasks import RECORDS_DDL, Options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["content_flows", "file_contents", "read_contents", "read_uri_folders"]

# Spark packs small files into one task, each costing this much of a task's bytes: past any
# task's size, every file is a task of its own (a `binaryFile` file is never split).
_FILE_COST: Final = str(1 << 40)


def file_contents(spark: SparkSession, uris: list[str]) -> DataFrame:
    """`path, content` of the files `uris`, read by Spark a file a task (a partition each)."""
    spark.conf.set("spark.sql.files.openCostInBytes", _FILE_COST)
    return spark.read.format("binaryFile").load(uris).select("path", "content")


def read_uri_folders(
    spark: SparkSession, remote: Mapping[int, Input], options: Options
) -> tuple[DataFrame, DataFrame, dict[int, Folder]]:
    """The first two jobs over the URI folders `remote`: their read rows (as `files.read_files`'),
    the first job's rows (to unpersist once those are computed), and the folders' plans."""
    from pyspark.sql import functions as F

    where: dict[str, list[tuple[int, int]]] = {}
    for index, one in remote.items():
        for listed, file in enumerate(one.files):
            where.setdefault(file.uri, []).append((index, listed))

    def flows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return content_flows(batches, where)

    named = file_contents(spark, sorted(where)).mapInArrow(flows, FLOWS_DDL).persist()
    heads = {
        (int(r["input"]), int(r["order"])): (int(r["lines"]), r["head"])
        for r in named.filter(F.col("flow").isNull()).collect()
    }
    folders = {index: _plan_remote(index, one, heads) for index, one in remote.items()}
    # listed -> planned: (input, listed, order) of each file the plans read.
    orders = []
    sizes = {}
    for index, folder in folders.items():
        listed_of = {f.uri: k for k, f in enumerate(remote[index].files)}
        for order, planned in enumerate(folder.files):
            listed = listed_of[planned.path]
            orders.append((index, listed, order))
            sizes[(index, order)] = heads.get((index, listed), (0, None))[0]
    placed = spark.createDataFrame(orders, "input int, listed int, order int")
    names = (
        named.filter(F.col("flow").isNotNull())
        .withColumnRenamed("order", "listed")
        .join(placed, on=["input", "listed"])
        .select("input", "order", "flow")
    )
    rows = [
        (folder.files[order].path, index, order, base)
        for index, order, base, _ in bases(folders, sizes)
        for folder in [folders[index]]
    ]
    plan_rows = spark.createDataFrame(rows, "path string, input int, order int, base long")
    todo = plan_rows.join(skips(names), on=["input", "order"], how="left")
    # Broadcast: each file's bytes stay in the task that read them.
    contents = file_contents(spark, sorted({row[0] for row in rows}))
    joined = contents.join(F.broadcast(todo), on="path")

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return read_contents(batches, folders, options)

    return joined.mapInArrow(read, RECORDS_DDL), named, folders


def _plan_remote(
    index: int, one: Input, heads: Mapping[tuple[int, int], tuple[int, str | None]]
) -> Folder:
    """The plan of URI folder `one` from its files' first records (`content_flows`)."""
    counts: Counter[str] = Counter()
    cuts: dict[str, int] = {}
    looked = []
    for listed, file in enumerate(one.files):
        head = heads.get((index, listed), (0, None))[1]
        looked.append((file.uri, None if head is None else json.loads(head), file.size))
    planned = plan_heads(looked, counts, cuts)
    return Folder(index, one.name, tuple(planned), dict(counts), cuts)


def content_flows(
    batches: Iterator[pa.RecordBatch], where: Mapping[str, list[tuple[int, int]]]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `path, content` rows of URI folders' files (`where`: each file's
    input and place in its listing, as `order`): as `files.file_flows`, and with the line count
    the `head_fields` of the file's first record (JSON)."""
    for batch in batches:
        for row in batch.to_pylist():
            content = bytes(row["content"])
            lines, _ = split_lines(content)
            head = head_fields(first_record(content))
            said = None if head is None else json.dumps(head)
            for index, listed in where[str(row["path"])]:
                yield flow_rows(index, listed, lines, said)


def read_contents(
    batches: Iterator[pa.RecordBatch], folders: Mapping[int, Folder], options: Options
) -> Iterator[pa.RecordBatch]:
    """`files.read_files` over `path, content, input, order, base, skip` rows of URI folders' files:
    each written to a private scratch folder under its own name and read there."""
    for batch in batches:
        for row in batch.to_pylist():
            folder = folders[int(row["input"])]
            order = int(row["order"])
            file = folder.files[order]
            with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark-input")) as scratch:
                local = Path(scratch) / file.path.rstrip("/").rsplit("/", 1)[-1]
                local.write_bytes(row["content"])
                row["content"] = None
                staged = replace(file, path=str(local))
                yield from read_file(staged, folder.index, order, row, options)
