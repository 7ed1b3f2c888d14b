"""One file's task in a capture folder read a file a task (`analyzer.spark.files`), local or
named by a URI (`analyzer.spark.urifolders`): the folder's plan shipped to it (`Folder`), what
the driver plans for it (where it starts in its run: `bases`; its crossing flows: `skips`), the
flow ids it names (`flow_rows`), its read but for its crossing flows, whose lines it yields
as they are (`read_file`, `LINES`), and the `part` row that carries its counts and capture
health to the driver (`part_row`, `read_part`).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl
import pyarrow as pa

from analyzer.ingest import Ingested
from analyzer.ingest.bulk import flow_ids
from analyzer.ingest.flowlines import FlowLine, flow_lines
from analyzer.ingest.jsonl import ReadPart, read_capture_file
from analyzer.ingest.lines import CaptureFile, RunState
from analyzer.scratch import scratch_prefix
from analyzer.spark.tasks import RECORDS, Options, pack, table_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "FLOWS_DDL",
    "LINES",
    "Folder",
    "bases",
    "flow_rows",
    "part_row",
    "read_file",
    "read_part",
    "skips",
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
FLOWS_DDL: Final = "input int, order int, flow string, lines long, head string"
LINES: Final = pl.Schema(
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
    """A capture folder read a file a task: its input index, its name as given, its
    files in `plan` order and what `plan` counted (picklable: shipped to the executors)."""

    index: int
    name: str
    files: tuple[CaptureFile, ...]
    counts: Mapping[str, int]
    cuts: Mapping[str, int]


def bases(
    folders: Mapping[int, Folder], sizes: Mapping[tuple[int, int], int]
) -> Iterator[tuple[int, int, int, None]]:
    """Each file's first position in its run: the lines of the run's files before it."""
    for folder in folders.values():
        before: dict[str, int] = {}
        for order, file in enumerate(folder.files):
            yield folder.index, order, before.get(file.run, 0), None
            before[file.run] = before.get(file.run, 0) + sizes[(folder.index, order)]


def skips(names: DataFrame) -> DataFrame:
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


def flow_rows(index: int, order: int, lines: list[bytes], head: str | None) -> pa.RecordBatch:
    """A file's first-job rows: its distinct flow ids (`lines` null), then its line count and
    `head` (`flow` null)."""
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


def read_file(
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
    yield part_row(part, index)


def _line_rows(lines: list[FlowLine], index: int) -> pa.RecordBatch:
    flows = flow_ids([one.line for one in lines]).to_list()
    frame = pl.DataFrame(
        [(flow, *one) for flow, one in zip(flows, lines, strict=True)], schema=LINES, orient="row"
    )
    rows = [
        {"group": str(key[0]), "input": index, "table": "lines", "blob": pack(part)}
        for key, part in frame.partition_by("flow", as_dict=True, include_key=False).items()
    ]
    return pa.RecordBatch.from_pylist(rows, schema=RECORDS)


def part_row(part: ReadPart, index: int) -> pa.RecordBatch:
    """A task's counts and capture health as a `RECORDS` row (table `part`, JSON)."""
    fields = {
        "counts": dict(part.counts),
        "records": part.records,
        "runs": {name: asdict(run) for name, run in part.runs.items()},
    }
    blob = json.dumps(fields).encode()
    return pa.RecordBatch.from_pylist(
        [{"group": "", "input": index, "table": "part", "blob": blob}], schema=RECORDS
    )


def read_part(blob: bytes) -> ReadPart:
    """The `ReadPart` a `part_row` carries."""
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
