"""A capture's flows that continue from one file into the next, read whole: the lines of
those flows from every file, in capture order, through the per-record lane.

A capture read a file at a time (the Spark engine's ingest tasks) reads each file with
`analyzer.ingest.jsonl.read_capture_file`, leaving out the flows other files hold lines of too:
their SSE decoder, chunk ordinals and stream end span the files. `read_flow_lines` reads those
flows here, so every flow is decoded by one reader in order, as the whole-capture reader does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import pydantic_core

from analyzer.ingest import bulk
from analyzer.ingest.common import PartWriter, paused_gc
from analyzer.ingest.jsonl import ReadPart
from analyzer.ingest.lines import BOM, CaptureFile, RunState, parse_line, take_record
from analyzer.normalize import DEFAULT_BATCH_EVENTS, Normalizer

__all__ = ["FlowLine", "file_lines", "flow_lines", "read_flow_lines", "split_lines"]


class FlowLine(NamedTuple):
    """A line of a flow that `read_capture_file` left to `read_flow_lines`."""

    order: int  # the file's index in the capture's `plan`
    position: int  # in its run, as the whole-capture reader counts lines
    first: bool  # the file's first line (it may hold a byte order mark)
    torn: bool  # the file's last line, without a line end
    line: bytes


def file_lines(path: str) -> tuple[list[bytes], bool]:
    """A capture file's lines, as the reader cuts them, and whether the last one is torn."""
    with open(path, "rb") as fh:
        return split_lines(fh.read())


def split_lines(content: bytes) -> tuple[list[bytes], bool]:
    """A capture file's bytes cut into lines as the reader cuts them, and whether the last
    one is torn."""
    lines = content.split(b"\n")
    tail = lines.pop()
    if tail:
        lines.append(tail)
    return lines, bool(tail)


def flow_lines(file: CaptureFile, order: int, base: int, flows: frozenset[str]) -> list[FlowLine]:
    """The lines of `flows` in one file (`base`: the position of its first line in its run)."""
    lines, torn = file_lines(file.path)
    if not lines or not flows:
        return []
    ids = bulk.flow_ids(lines)
    picked = ids.is_in(list(flows)).fill_null(False).arg_true().to_list()
    last = len(lines) - 1
    return [FlowLine(order, base + i, i == 0, torn and i == last, lines[i]) for i in picked]


def read_flow_lines(
    lines: Iterable[FlowLine],
    files: Sequence[CaptureFile],
    out_dir: Path,
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    batch_events: int = DEFAULT_BATCH_EVENTS,
    prefix: str = "f",
) -> ReadPart:
    """Whole flows from their lines in every file of a capture (`flow_lines`, in capture
    order: by file, then position), each record taken as the whole-capture reader takes it."""
    normalizer = Normalizer(
        replica_header=replica_header, client_header=client_header, batch_events=batch_events
    )
    writer = PartWriter(out_dir, prefix)
    counts: Counter[str] = Counter()
    runs: dict[str, RunState] = {}
    seen_other: set[tuple[str, int]] = set()
    current = -1
    with paused_gc():
        for one in lines:
            file = files[one.order]
            if one.order != current:
                normalizer.set_run(file.run_id, file.client_header)
                current = one.order
            line = one.line
            if one.first and line.startswith(BOM):
                counts["bom"] += 1
                line = line[3:]
            record = parse_line(line, one.torn, counts, pydantic_core.from_json)
            if record is not None:
                run = runs.setdefault(file.run, RunState())
                take_record(record, one.position, file, run, counts, seen_other, normalizer.add)
            if normalizer.pending_events() >= batch_events:
                writer.write(normalizer.drain())
        writer.write(normalizer.finish())
    counts.update(normalizer.counts)
    return ReadPart(counts, normalizer.records, runs)
