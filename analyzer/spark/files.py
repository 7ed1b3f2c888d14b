"""The Spark engine's ingest of a capture folder a file a task.

A capture's rotated files continue one another: a flow may start in one file and end in the
next, and the capture's health (`seq` gaps, `capture_close`) is judged over its whole run.
Three jobs still read it a file a task and give what the whole-capture reader gives:

1. `file_flows`: each file's line count and the flow ids its lines name (no record parsed).
   The driver gets the line counts (one a file: where each file starts in its run); Spark
   finds the flows whose lines are in two files or more (the crossing flows).
2. `read_files`: each file read (`analyzer.ingest.jsonl.read_capture_file`) but for its
   crossing flows, whose lines it yields as they are, keyed by flow id; its tables as `RECORDS`
   blobs (`analyzer.spark.tasks`), its counts and capture health as a `part` row.
3. `read_crossing`: the crossing flows, hashed into a few groups, each flow read whole from
   its lines of every file in capture order (`analyzer.ingest.flowlines.read_flow_lines`).

A local folder's files are read where they are, by path; its plan (`plan_folder`: the files'
order, from their first records) is made on the driver. A URI folder's first two jobs read its
files through Spark and plan it from their first records (`analyzer.spark.urifolders`); what
a file's task of either kind does is shared (`analyzer.spark.filetask`). The driver merges
each input's `part` rows into its report (`capture_report`).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl
import pyarrow as pa

from analyzer.cache import find_entry, input_key
from analyzer.ingest import Ingested, InputReport, UnreadableInput
from analyzer.ingest.common import os_reason
from analyzer.ingest.flowlines import FlowLine, file_lines, read_flow_lines
from analyzer.ingest.jsonl import ReadPart, capture_report
from analyzer.ingest.lines import capture_files, plan
from analyzer.scratch import scratch_prefix
from analyzer.spark.filetask import (
    FLOWS_DDL,
    LINES,
    Folder,
    bases,
    flow_rows,
    part_row,
    read_file,
    read_part,
    skips,
)
from analyzer.spark.inputs import Input, is_uri
from analyzer.spark.tasks import RECORDS, RECORDS_DDL, Options, table_records, unpack
from analyzer.spark.urifolders import read_uri_folders

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "Folder",
    "by_file",
    "folder_reports",
    "plan_folder",
    "read_folders",
]

_TODO_DDL: Final = "input int, order int, base long, skip array<string>, slot int"


def plan_folder(index: int, name: str, options: Options) -> Folder | None:
    """The plan of input `name` when it is a capture folder of two files or more that the
    default engine's cache does not already hold (else None: it is read as one task)."""
    path = Path(name)
    if not path.is_dir():
        return None
    files = capture_files(path)
    if len(files) < 2:
        return None
    try:
        if options.cache:
            key = input_key(
                "capture",
                files,
                replica_header=options.replica_header,
                client_header=options.client_header,
            )
            if find_entry(path, key) is not None:
                return None
        counts: Counter[str] = Counter()
        cuts: dict[str, int] = {}
        planned = plan(files, counts, cuts)
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    return Folder(index, name, tuple(planned), dict(counts), cuts)


def by_file(one: Input) -> bool:
    """Whether a URI input is a capture folder read a file a task (two files or more)."""
    return one.uri and one.folder and len(one.files) >= 2


def read_folders(
    spark: SparkSession,
    folders: Mapping[int, Folder],
    remote: Mapping[int, Input],
    options: Options,
) -> tuple[DataFrame, list[DataFrame], dict[int, Folder]]:
    """The `RECORDS` rows of the local `folders` and the URI folders `remote` (and one `part`
    row a task, for `folder_reports`), the frames to unpersist once they are computed, and
    every folder's plan (the URI folders' planned here, from their files' first records)."""
    from pyspark.sql import functions as F

    held: list[DataFrame] = []
    reads: list[DataFrame] = []
    planned = dict(folders)
    if folders:
        listed = _a_task_each(
            spark,
            [(f.index, order, 0, None) for f in folders.values() for order in range(len(f.files))],
        )

        def flows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return file_flows(batches, folders)

        named = listed.mapInArrow(flows, FLOWS_DDL).persist()
        held.append(named)
        sizes = {
            (int(r["input"]), int(r["order"])): int(r["lines"])
            for r in named.filter(F.col("flow").isNull()).collect()
        }
        crossing = skips(named.filter(F.col("flow").isNotNull()).select("input", "order", "flow"))
        starts = _a_task_each(spark, list(bases(folders, sizes)))
        todo = starts.drop("skip").join(crossing, on=["input", "order"], how="left")
        # One file a task again (the join hashed them into its own partitions).
        todo = todo.repartitionByRange(len(sizes), "slot")

        def files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return read_files(batches, folders, options)

        reads.append(todo.mapInArrow(files, RECORDS_DDL))
    if remote:
        remote_read, named, plans = read_uri_folders(spark, remote, options)
        reads.append(remote_read)
        held.append(named)
        planned.update(plans)
    read = reads[0] if len(reads) == 1 else reads[0].unionByName(reads[1])
    read = read.persist()
    held.append(read)
    groups = spark.sparkContext.defaultParallelism

    def whole(table: pa.Table) -> pa.Table:
        return read_crossing(table, planned, options)

    lines = read.filter(F.col("table") == "lines")
    crossed = (
        lines.withColumn("bucket", F.pmod(F.xxhash64("group"), F.lit(groups)))
        .groupBy("input", "bucket")
        .applyInArrow(whole, RECORDS_DDL)
    )
    return read.filter(F.col("table") != "lines").unionByName(crossed), held, planned


def _a_task_each(spark: SparkSession, rows: list[tuple[int, int, int, None]]) -> DataFrame:
    """`input, order, base, skip, slot` rows, each in a partition of its own."""
    slotted = [(*row, slot) for slot, row in enumerate(rows)]
    rdd = spark.sparkContext.parallelize(slotted, max(1, len(slotted)))
    return spark.createDataFrame(rdd, _TODO_DDL)


def file_flows(
    batches: Iterator[pa.RecordBatch], folders: Mapping[int, Folder]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `input, order` rows: each file's distinct flow ids (`lines` null),
    then its line count (`flow` null)."""
    for batch in batches:
        for row in batch.to_pylist():
            index, order = int(row["input"]), int(row["order"])
            lines, _ = file_lines(folders[index].files[order].path)
            yield flow_rows(index, order, lines, None)


def read_files(
    batches: Iterator[pa.RecordBatch], folders: Mapping[int, Folder], options: Options
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `input, order, base, skip` rows: each file read but for the flows in
    `skip`; its tables, the lines of those flows (table `lines`, keyed by flow id), and its
    `part` row."""
    for batch in batches:
        for row in batch.to_pylist():
            folder = folders[int(row["input"])]
            order = int(row["order"])
            yield from read_file(folder.files[order], folder.index, order, row, options)


def read_crossing(table: pa.Table, folders: Mapping[int, Folder], options: Options) -> pa.Table:
    """`applyInArrow` over the `lines` rows of some crossing flows of one input: each flow read
    whole, in capture order; their tables and a `part` row."""
    rows = pl.from_arrow(table)
    assert isinstance(rows, pl.DataFrame)
    index = int(rows["input"][0])
    folder = folders[index]
    packed = pl.Schema({name: kind for name, kind in LINES.items() if name != "flow"})
    lines = unpack(rows["blob"].to_list(), packed).sort("order", "position")
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark")) as out:
        part = read_flow_lines(
            (FlowLine(*values) for values in lines.iter_rows()),
            folder.files,
            Path(out),
            replica_header=options.replica_header,
            client_header=options.client_header,
        )
        batches = list(table_records(Ingested((), (Path(out),), (None,)), index))
    batches.append(part_row(part, index))
    return pa.Table.from_batches(batches, schema=RECORDS)


def folder_reports(
    rows: Iterable[tuple[int, bytes]], folders: Mapping[int, Folder]
) -> dict[int, InputReport]:
    """Each folder's report from the `part` rows (`input, blob`) of its tasks, as the
    whole-capture reader gives it (`capture_report`)."""
    parts: dict[int, list[ReadPart]] = {index: [] for index in folders}
    for index, blob in rows:
        parts[index].append(read_part(blob))
    return {
        index: capture_report(
            _named(folder.name), folder.files, Counter(folder.counts), parts[index], folder.cuts
        )
        for index, folder in folders.items()
    }


def _named(name: str) -> Path | str:
    """What a folder's report calls it: a URI as given (a `Path` would fold its `//`)."""
    return name if is_uri(name) else Path(name)
