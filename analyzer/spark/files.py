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
order, from their first records) is made on the driver. A URI folder's files are read by Spark
(`binaryFile`, a file a task: the Python workers have no client of the cluster's file systems,
Spark's JVM has them all, with their credentials and data locality); the first job also sends
each file's first record (what `plan_heads` reads of it), and the driver plans the folder from
those, never reading a file itself. The second job gets each file's bytes where Spark read
them: its plan row (position, crossing flows) is broadcast to it, so no file's bytes are
shuffled. The driver merges each input's `part` rows into its report (`capture_report`).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl
import pyarrow as pa

from analyzer.cache import find_entry, input_key
from analyzer.ingest import Ingested, InputReport, UnreadableInput
from analyzer.ingest.bulk import flow_ids
from analyzer.ingest.common import os_reason
from analyzer.ingest.flowlines import (
    FlowLine,
    file_lines,
    flow_lines,
    read_flow_lines,
    split_lines,
)
from analyzer.ingest.jsonl import ReadPart, capture_report, read_capture_file
from analyzer.ingest.lines import (
    CaptureFile,
    RunState,
    capture_files,
    first_record,
    head_fields,
    plan,
    plan_heads,
)
from analyzer.scratch import scratch_prefix
from analyzer.spark.inputs import Input, is_uri
from analyzer.spark.tasks import RECORDS, RECORDS_DDL, Options, pack, table_records, unpack

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "Folder",
    "by_file",
    "file_contents",
    "folder_reports",
    "plan_folder",
    "read_folders",
]

_FLOWS: Final = pa.schema(
    [
        ("input", pa.int32()),
        ("order", pa.int32()),
        ("flow", pa.string()),
        ("lines", pa.int64()),
        ("head", pa.string()),
    ]
)
_FLOWS_DDL: Final = "input int, order int, flow string, lines long, head string"
_TODO_DDL: Final = "input int, order int, base long, skip array<string>, slot int"
# Spark packs small files into one task, each costing this much of a task's bytes: past any
# task's size, every file is a task of its own (a `binaryFile` file is never split).
_FILE_COST: Final = str(1 << 40)
_LINES: Final = pl.Schema(
    {
        "flow": pl.String,
        "order": pl.Int64,
        "position": pl.Int64,
        "first": pl.Boolean,
        "torn": pl.Boolean,
        "line": pl.Binary,
    }
)


@dataclass(frozen=True)
class Folder:
    """A local capture folder read a file a task: its input index, its name as given, its
    files in `plan` order and what `plan` counted (picklable: shipped to the executors)."""

    index: int
    name: str
    files: tuple[CaptureFile, ...]
    counts: Mapping[str, int]
    cuts: Mapping[str, int]


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

        named = listed.mapInArrow(flows, _FLOWS_DDL).persist()
        held.append(named)
        sizes = {
            (int(r["input"]), int(r["order"])): int(r["lines"])
            for r in named.filter(F.col("flow").isNull()).collect()
        }
        skips = _skips(named.filter(F.col("flow").isNotNull()).select("input", "order", "flow"))
        bases = _a_task_each(spark, list(_bases(folders, sizes)))
        todo = bases.drop("skip").join(skips, on=["input", "order"], how="left")
        # One file a task again (the join hashed them into its own partitions).
        todo = todo.repartitionByRange(len(sizes), "slot")

        def files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return read_files(batches, folders, options)

        reads.append(todo.mapInArrow(files, RECORDS_DDL))
    if remote:
        remote_read, named, plans = _read_remote(spark, remote, options)
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


def _skips(names: DataFrame) -> DataFrame:
    """`input, order, skip`: each file's crossing flows (of `input, order, flow` rows: the
    flows whose lines are in two files or more of their input)."""
    from pyspark.sql import functions as F

    crossing = (
        names.groupBy("input", "flow")
        .agg(F.countDistinct("order").alias("files"))
        .filter(F.col("files") > 1)
        .select("input", "flow")
    )
    return (
        names.join(crossing, on=["input", "flow"])
        .groupBy("input", "order")
        .agg(F.collect_list("flow").alias("skip"))
    )


def file_contents(spark: SparkSession, uris: list[str]) -> DataFrame:
    """`path, content` of the files `uris`, read by Spark a file a task (a partition each)."""
    spark.conf.set("spark.sql.files.openCostInBytes", _FILE_COST)
    return spark.read.format("binaryFile").load(uris).select("path", "content")


def _read_remote(
    spark: SparkSession, remote: Mapping[int, Input], options: Options
) -> tuple[DataFrame, DataFrame, dict[int, Folder]]:
    """The first two jobs over the URI folders `remote`: their read rows (as `read_files`'),
    the first job's rows (to unpersist once those are computed), and the folders' plans."""
    from pyspark.sql import functions as F

    where: dict[str, list[tuple[int, int]]] = {}
    for index, one in remote.items():
        for listed, file in enumerate(one.files):
            where.setdefault(file.uri, []).append((index, listed))

    def flows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return content_flows(batches, where)

    named = file_contents(spark, sorted(where)).mapInArrow(flows, _FLOWS_DDL).persist()
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
        for index, order, base, _ in _bases(folders, sizes)
        for folder in [folders[index]]
    ]
    plan_rows = spark.createDataFrame(rows, "path string, input int, order int, base long")
    todo = plan_rows.join(_skips(names), on=["input", "order"], how="left")
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


def _a_task_each(spark: SparkSession, rows: list[tuple[int, int, int, None]]) -> DataFrame:
    """`input, order, base, skip, slot` rows, each in a partition of its own."""
    slotted = [(*row, slot) for slot, row in enumerate(rows)]
    rdd = spark.sparkContext.parallelize(slotted, max(1, len(slotted)))
    return spark.createDataFrame(rdd, _TODO_DDL)


def _bases(
    folders: Mapping[int, Folder], sizes: Mapping[tuple[int, int], int]
) -> Iterator[tuple[int, int, int, None]]:
    """Each file's first position in its run: the lines of the run's files before it."""
    for folder in folders.values():
        before: dict[str, int] = {}
        for order, file in enumerate(folder.files):
            yield folder.index, order, before.get(file.run, 0), None
            before[file.run] = before.get(file.run, 0) + sizes[(folder.index, order)]


def file_flows(
    batches: Iterator[pa.RecordBatch], folders: Mapping[int, Folder]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `input, order` rows: each file's distinct flow ids (`lines` null),
    then its line count (`flow` null)."""
    for batch in batches:
        for row in batch.to_pylist():
            index, order = int(row["input"]), int(row["order"])
            lines, _ = file_lines(folders[index].files[order].path)
            yield _flow_rows(index, order, lines, None)


def content_flows(
    batches: Iterator[pa.RecordBatch], where: Mapping[str, list[tuple[int, int]]]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `path, content` rows of URI folders' files (`where`: each file's
    input and place in its listing, as `order`): as `file_flows`, and with the line count
    the `head_fields` of the file's first record (JSON)."""
    for batch in batches:
        for row in batch.to_pylist():
            content = bytes(row["content"])
            lines, _ = split_lines(content)
            head = head_fields(first_record(content))
            said = None if head is None else json.dumps(head)
            for index, listed in where[str(row["path"])]:
                yield _flow_rows(index, listed, lines, said)


def _flow_rows(index: int, order: int, lines: list[bytes], head: str | None) -> pa.RecordBatch:
    named = flow_ids(lines).drop_nulls().unique().to_list()
    return pa.RecordBatch.from_pydict(
        {
            "input": [index] * (len(named) + 1),
            "order": [order] * (len(named) + 1),
            "flow": [*named, None],
            "lines": [None] * len(named) + [len(lines)],
            "head": [None] * len(named) + [head],
        },
        schema=_FLOWS,
    )


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
            yield from _read_file(folder.files[order], folder.index, order, row, options)


def read_contents(
    batches: Iterator[pa.RecordBatch], folders: Mapping[int, Folder], options: Options
) -> Iterator[pa.RecordBatch]:
    """`read_files` over `path, content, input, order, base, skip` rows of URI folders' files:
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
                yield from _read_file(staged, folder.index, order, row, options)


def _read_file(
    file: CaptureFile, index: int, order: int, row: Mapping[str, Any], options: Options
) -> Iterator[pa.RecordBatch]:
    """One file of a folder read but for its crossing flows (`row`: its `base` and `skip`)."""
    base = int(row["base"])
    skip = frozenset(row["skip"] or ())
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark")) as out:
        part = read_capture_file(
            file,
            Path(out),
            base=base,
            skip=skip,
            replica_header=options.replica_header,
            client_header=options.client_header,
        )
        yield from table_records(Ingested((), (Path(out),), (None,)), index)
    if skip:
        yield _line_rows(flow_lines(file, order, base, skip), index)
    yield _part_row(part, index)


def _line_rows(lines: list[FlowLine], index: int) -> pa.RecordBatch:
    flows = flow_ids([one.line for one in lines]).to_list()
    frame = pl.DataFrame(
        [(flow, *one) for flow, one in zip(flows, lines, strict=True)], schema=_LINES, orient="row"
    )
    rows = [
        {"group": str(key[0]), "input": index, "table": "lines", "blob": pack(part)}
        for key, part in frame.partition_by("flow", as_dict=True, include_key=False).items()
    ]
    return pa.RecordBatch.from_pylist(rows, schema=RECORDS)


def read_crossing(table: pa.Table, folders: Mapping[int, Folder], options: Options) -> pa.Table:
    """`applyInArrow` over the `lines` rows of some crossing flows of one input: each flow read
    whole, in capture order; their tables and a `part` row."""
    rows = pl.from_arrow(table)
    assert isinstance(rows, pl.DataFrame)
    index = int(rows["input"][0])
    folder = folders[index]
    packed = pl.Schema({name: kind for name, kind in _LINES.items() if name != "flow"})
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
    batches.append(_part_row(part, index))
    return pa.Table.from_batches(batches, schema=RECORDS)


def _part_row(part: ReadPart, index: int) -> pa.RecordBatch:
    fields = {
        "counts": dict(part.counts),
        "records": part.records,
        "runs": {name: asdict(run) for name, run in part.runs.items()},
    }
    blob = json.dumps(fields).encode()
    return pa.RecordBatch.from_pylist(
        [{"group": "", "input": index, "table": "part", "blob": blob}], schema=RECORDS
    )


def _read_part(blob: bytes) -> ReadPart:
    fields = json.loads(blob)
    runs = {}
    for name, run in fields["runs"].items():
        last = run["last"]
        runs[name] = RunState(
            breaks=[(int(p), int(s)) for p, s in run["breaks"]],
            offset=run["offset"],
            last=None if last is None else (int(last[0]), int(last[1])),
            closed=bool(run["closed"]),
            dropped=int(run["dropped"]),
            addon_errors=int(run["addon_errors"]),
        )
    return ReadPart(Counter(fields["counts"]), int(fields["records"]), runs)


def folder_reports(
    rows: Iterable[tuple[int, bytes]], folders: Mapping[int, Folder]
) -> dict[int, InputReport]:
    """Each folder's report from the `part` rows (`input, blob`) of its tasks, as the
    whole-capture reader gives it (`capture_report`)."""
    parts: dict[int, list[ReadPart]] = {index: [] for index in folders}
    for index, blob in rows:
        parts[index].append(_read_part(blob))
    return {
        index: capture_report(
            _named(folder.name), folder.files, Counter(folder.counts), parts[index], folder.cuts
        )
        for index, folder in folders.items()
    }


def _named(name: str) -> Path | str:
    """What a folder's report calls it: a URI as given (a `Path` would fold its `//`)."""
    return name if is_uri(name) else Path(name)
