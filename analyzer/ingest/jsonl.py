"""Reader of seamwatch capture files (JSON Lines, schema 1): a directory, a file, rotated files.

Tolerant by design (DESIGN.md §4): a torn last line (`.partial` files are written as they go),
a corrupt middle line, invalid UTF-8, a byte order mark, a `seq` gap, a missing
`capture_close`, duplicated records are each counted in the input's report and skipped; the
rest is read. Only an unknown schema MAJOR stops the analysis (`UnsupportedSchema`).

Plain chunk records (nearly every line) go through the bulk lane (`analyzer.ingest.bulk`:
Polars reads them in batches, a batch it refuses is halved until the bad lines are alone, and
splits their SSE text into events). Every other line is parsed on its own with pydantic-core's
JSON parser and a cheap structural check per record kind; full pydantic validation costs ~3x
more per record and the normalizer needs only these fields.

Both cores: the flows are split between worker processes by a hash of the flow id, read off
each line without parsing it. Every worker reads every line, parses only its own, and runs its
own `Normalizer`, so an SSE stream is always decoded by one decoder, in order. Lines without a
flow (capture_open, capture_stats, ...) and lines too damaged to route go to worker 0.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import polars as pl
import pydantic_core

from analyzer.ingest import bulk
from analyzer.ingest.common import (
    PROGRESS_EVERY_S,
    SKIPPED_KEYS,
    InputReport,
    PartWriter,
    UnreadableInput,
    describe_counts,
    os_reason,
    paused_gc,
)
from analyzer.ingest.lines import (
    BOM,
    CaptureFile,
    RunState,
    capture_files,
    count_missing,
    is_capture_file,
    mark_seq,
    parse_line,
    plan,
    record_problem,
    take_record,
)
from analyzer.memory import starting_parse_workers
from analyzer.normalize import DEFAULT_BATCH_EVENTS, BulkDescription, Normalizer, SseRun

__all__ = [
    "PARALLEL_MIN_BYTES",
    "ReadPart",
    "capture_files",
    "capture_report",
    "is_capture_file",
    "read_capture",
    "read_capture_file",
    "record_problem",
]

# Below this much input a process pool costs more (interpreter start, imports) than it saves.
PARALLEL_MIN_BYTES = 24 << 20
_READ_BLOCK = 16 << 20


@dataclass(frozen=True)
class _Task:
    files: tuple[CaptureFile, ...]
    part: int
    parts: int
    out_dir: str
    prefix: str
    replica_header: str | None
    client_header: str | None
    batch_events: int
    skip: frozenset[str] = frozenset()  # flows another reader takes (`read_flow_lines`)
    base: int = 0  # position of the first file's first line in its run


@dataclass
class ReadPart:
    """What one reader of some of a capture's lines found: the counts, the records taken, the
    capture health of each run (`RunState`, merged by `capture_report`)."""

    counts: Counter[str]
    records: int
    runs: dict[str, RunState]
    bytes_read: int = 0


# Where a worker reports how many bytes it has handled: a shared array (one cell a worker) in a
# pool's processes, a callback when the reading runs in this process. Set before `_scan`.
_progress_cells: Any = None
_progress_callback: Callable[[int], None] | None = None


def _init_worker(cells: Any) -> None:
    global _progress_cells
    _progress_cells = cells


def _report_progress(part: int, done: int) -> None:
    if _progress_cells is not None:
        _progress_cells[part] = done
    elif _progress_callback is not None:
        _progress_callback(done)


def _scan(task: _Task) -> ReadPart:
    """One worker: read every line of every file, handle the lines this worker owns."""
    with paused_gc():
        return _scan_files(task)


def _scan_files(task: _Task) -> ReadPart:
    normalizer = Normalizer(
        replica_header=task.replica_header,
        client_header=task.client_header,
        batch_events=task.batch_events,
    )
    writer = PartWriter(Path(task.out_dir), f"{task.prefix}{task.part}")
    counts: Counter[str] = Counter()
    runs: dict[str, RunState] = {}
    positions: dict[str, int] = {task.files[0].run: task.base} if task.files else {}
    seen_other: set[tuple[str, int]] = set()  # (run, seq) of records without a flow
    parts = task.parts
    part = task.part
    from_json = pydantic_core.from_json
    add = normalizer.add
    batch = task.batch_events
    bytes_read = 0

    for file in task.files:
        run = runs.setdefault(file.run, RunState())
        pos = positions.get(file.run, 0)
        # Worker 0 alone sees capture_open (it has no flow): tell every worker the run here.
        normalizer.set_run(file.run_id, file.client_header)
        with open(file.path, "rb") as fh:
            carry = b""
            first_line = True
            while True:
                block = fh.read(_READ_BLOCK)
                if not block:
                    break
                bytes_read += len(block)
                if carry:
                    block = carry + block
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry = block
                    continue
                carry = block[cut + 1 :]
                lines = block[:cut].split(b"\n")
                block_lane = _Block(normalizer, run, file, counts, seen_other, pos, first_line)
                pos += len(lines)
                first_line = False
                block_lane.read(lines, parts, part, task.skip)
                if normalizer.pending_events() >= batch:
                    writer.write(normalizer.drain())
                _report_progress(part, bytes_read - len(carry))
            if carry:
                # The file does not end with a line end: the writer stopped mid-line.
                position = pos
                pos += 1
                if (parts == 1 or bulk.owner(carry, parts) == part) and not (
                    task.skip and bulk.flow_ids([carry])[0] in task.skip
                ):
                    if first_line and carry.startswith(BOM):
                        counts["bom"] += 1
                        carry = carry[3:]
                    record = parse_line(carry, True, counts, from_json)
                    if record is not None:
                        take_record(record, position, file, run, counts, seen_other, add)
        positions[file.run] = pos
    writer.write(normalizer.finish())
    counts.update(normalizer.counts)
    return ReadPart(counts, normalizer.records, runs, bytes_read)


class _Block:
    """One block of lines of a worker: its plain chunks through the bulk lane
    (`analyzer.ingest.bulk`), the rest through the per-record lane, in an order that gives what
    reading each line in turn gives.

    Per flow, the block's plain chunks are one run, taken at once (`Normalizer.take_run`) when
    the next record of the flow in the block comes after all of them, or at the block's end.
    A record of the flow between two of them, or a flow whose state does not let the run start
    (a block open in its decoder, a chunk missing), sends the run's chunks the per-record way.
    """

    def __init__(
        self,
        normalizer: Normalizer,
        run: RunState,
        file: CaptureFile,
        counts: Counter[str],
        seen_other: set[tuple[str, int]],
        base: int,
        first_line: bool,
    ) -> None:
        self.normalizer = normalizer
        self.run = run
        self.file = file
        self.counts = counts
        self.seen_other = seen_other
        self.base = base  # position (in the run's lines) of the block's first line
        self.first_line = first_line
        self.marks: list[tuple[int, int]] = []  # (position, seq) of the records taken
        self.pending: dict[str, dict[str, Any]] = {}  # flow id -> its run, not yet taken
        self.taken: list[tuple[str, int, int, str]] = []
        self.chunks = bulk.EMPTY_CHUNKS

    def read(self, lines: list[bytes], parts: int, part: int, skip: frozenset[str]) -> None:
        sieved, slow = bulk.sieve(lines, parts, part, self.first_line, skip)
        queue: list[tuple[int, dict[str, Any] | None]] = [(i, None) for i in slow]
        events = bulk.EMPTY_EVENTS
        if sieved:
            chunks, refused = bulk.read_chunks([lines[i] for i in sieved])
            index_of = pl.Series(sieved, dtype=pl.Int64)
            chunks = chunks.with_columns(index_of.gather(chunks["line"]).alias("line"))
            queue.extend((sieved[i], None) for i in refused)
            events, plain = bulk.plain_events(chunks)
            for row in chunks.filter(~plain).iter_rows(named=True):
                queue.append((row["line"], row))
            self.chunks = chunks = chunks.filter(plain)
        described = self.normalizer.describe_data(events["data"].to_list())
        events = (
            events.with_row_index("event")
            .with_columns(pl.col("event").cast(pl.Int64))
            .join(described.carried, on="event", how="left", maintain_order="left")
            .with_columns(pl.col("data_bytes").fill_null(0))
            .drop("event")
        )
        for info in bulk.runs(self.chunks, events).iter_rows(named=True):
            self.pending[info["flow_id"]] = info
        heapq.heapify(queue)
        while queue:
            index, chunk = heapq.heappop(queue)
            if chunk is not None:
                self._resolve(chunk["flow_id"], index, queue)
                self._add_chunk(chunk)
                continue
            line = lines[index]
            if index == 0 and self.first_line and line.startswith(BOM):
                self.counts["bom"] += 1
                line = line[3:]
            record = parse_line(line, False, self.counts, pydantic_core.from_json)
            if record is None:
                continue
            flow_id = record.get("flow")
            if type(flow_id) is str and flow_id in self.pending:
                self._resolve(flow_id, index, queue)
            take_record(record, self.base + index, self.file, self.run, self.counts,
                  self.seen_other, self.normalizer.add, self.marks.append)  # fmt: skip
        for flow_id in list(self.pending):
            self._resolve(flow_id, None, queue)
        self._mark()
        if self.taken:
            self._emit(events, described)

    def _resolve(
        self, flow_id: str, before: int | None, queue: list[tuple[int, dict[str, Any] | None]]
    ) -> None:
        """Take the flow's pending run, or send its chunks the per-record way, before the
        record at line `before` (None: the block's end)."""
        info = self.pending.get(flow_id)
        if info is None or (before is not None and info["first_line"] > before):
            return
        del self.pending[flow_id]
        if (before is None or info["last_line"] < before) and info["contiguous"]:
            run = SseRun(
                info["first_n"],
                info["chunks"],
                info["events"],
                info["payload_events"],
                info["first_cursor"],
                info["last_id"],
                info["result_version"],
            )
            state = self.normalizer.take_run(flow_id, run)
            if state is not None:
                self.taken.append((flow_id, *state))
                return
        for chunk in self.chunks.filter(pl.col("flow_id") == flow_id).iter_rows(named=True):
            if before is None or chunk["line"] < before:
                self._add_chunk(chunk)
            else:
                heapq.heappush(queue, (chunk["line"], chunk))

    def _add_chunk(self, chunk: dict[str, Any]) -> None:
        try:
            self.normalizer.add_chunk(
                chunk["flow_id"], chunk["n"], {"text": chunk["text"]}, chunk["ts"],
                chunk["seq"], None,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError):
            self.counts["invalid_record"] += 1

    def _mark(self) -> None:
        """Capture health of the block's records (`mark_seq`), in line order."""
        taken = pl.DataFrame(self.marks, schema={"position": pl.Int64, "seq": pl.Int64},
                             orient="row")  # fmt: skip
        chunks = self.chunks.select(pl.col("line") + self.base, "seq")
        marks = pl.concat([taken, chunks.rename({"line": "position"})]).sort("position")
        if marks.height == 0:
            return
        offset = pl.col("seq") - pl.col("position")
        changes = marks.filter(
            (offset != offset.shift(1)).fill_null(True) | (pl.int_range(pl.len()) == pl.len() - 1)
        )
        for position, seq in changes.iter_rows():
            mark_seq(self.run, position, seq)

    def _emit(self, events: pl.DataFrame, described: BulkDescription) -> None:
        taken = pl.DataFrame(
            self.taken,
            schema={
                "flow_id": pl.String,
                "events_before": pl.Int64,
                "payload_before": pl.Int64,
                "last_before": pl.String,
            },
            orient="row",
        )
        frame, messages, tools = bulk.run_frames(events, described.messages, described.tools, taken)
        self.normalizer.add_frames(frame, messages, tools)
        carried = events.filter(
            pl.col("flow_id").is_in(taken["flow_id"].implode()) & ~pl.col("id_only")
        )
        self.normalizer.add_payloads(carried.select("data_hash", pl.col("data").alias("text")))


def _run(
    tasks: list[_Task], out_dir: Path, progress: Callable[[int], None] | None
) -> list[ReadPart]:
    """Run the workers: in this process for one, else in a pool (falling back to one).

    `progress` gets the bytes handled so far (every worker reads every byte: their mean).
    """
    global _progress_callback
    if len(tasks) > 1:
        # "spawn", not "fork": the parent may already run Polars' thread pool, which a forked
        # child would inherit mid-lock. Spawn re-imports the caller's __main__ (it needs the
        # usual `if __name__ == "__main__"` guard); when the pool cannot start, read in here.
        context = get_context("spawn")
        cells = context.Array("q", len(tasks), lock=False)
        try:
            with ProcessPoolExecutor(
                len(tasks), mp_context=context, initializer=_init_worker, initargs=(cells,)
            ) as pool:
                with starting_parse_workers():  # a worker is started at its task's submit
                    futures = [pool.submit(_scan, task) for task in tasks]
                while True:
                    done, running = wait(futures, PROGRESS_EVERY_S, FIRST_EXCEPTION)
                    if not running or any(f.exception() is not None for f in done):
                        break  # all finished, or one failed: result() below raises it
                    if progress is not None:
                        progress(sum(cells) // len(tasks))
                return [future.result() for future in futures]
        except (BrokenProcessPool, RuntimeError):
            for part in out_dir.glob("*.parquet"):
                part.unlink()
    _progress_callback = progress
    try:
        return [_scan(replace(tasks[0], part=0, parts=1))]
    finally:
        _progress_callback = None


def read_capture(
    path: Path,
    out_dir: Path,
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    workers: int | None = None,
    batch_events: int = DEFAULT_BATCH_EVENTS,
    progress: Callable[[int, int], None] | None = None,
) -> InputReport:
    """Read a capture directory or file, writing the normalized tables as parts to `out_dir`.

    `workers` defaults to the usable CPUs when the input is large enough to pay for a pool.
    `progress(done, total)` is called with bytes handled every block (and every 0.25 s).
    Raises UnreadableInput or UnsupportedSchema; everything else is a counted warning.
    """
    counts: Counter[str] = Counter()
    cuts: dict[str, int] = {}
    try:
        files = plan(capture_files(path), counts, cuts)
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    total = sum(f.size for f in files)
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if total >= PARALLEL_MIN_BYTES else 1
    workers = max(1, workers)
    tasks = [
        _Task(
            tuple(files),
            part,
            workers,
            str(out_dir),
            "c",
            replica_header,
            client_header,
            batch_events,
        )
        for part in range(workers)
    ]
    on_bytes = None if progress is None else (lambda done: progress(min(done, total), total))
    try:
        results = _run(tasks, out_dir, on_bytes)
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    if progress is not None:
        progress(total, total)
    return capture_report(path, files, counts, results, cuts)


def capture_report(
    path: Path | str,
    files: Sequence[CaptureFile],
    counts: Counter[str],
    results: Iterable[ReadPart],
    cuts: Mapping[str, int],
) -> InputReport:
    """The report of a capture read in parts (workers, files): `counts` holds what `plan`
    counted, `cuts` its retention cuts; each run's health is judged over all its parts."""
    counts = Counter(counts)
    records = 0
    by_run: dict[str, list[RunState]] = {}
    for result in results:
        counts.update(result.counts)
        records += result.records
        for name, run in result.runs.items():
            by_run.setdefault(name, []).append(run)
    for name, runs in by_run.items():
        count_missing(runs, cuts.get(name, -1), counts)
        if not any(run.closed for run in runs):
            counts["missing_close"] += 1
        counts["writer_dropped"] += max(run.dropped for run in runs)
        counts["addon_errors"] += max(run.addon_errors for run in runs)
    if not records and not any(str(f.path).endswith(".partial") for f in files):
        # (a `.partial` may be a capture whose first line is still being written)
        raise UnreadableInput(f"no capture records in {path}")
    clean = {key: n for key, n in sorted(counts.items()) if n}
    return InputReport(
        path=str(path),
        kind="capture",
        records=records,
        skipped=sum(n for key, n in clean.items() if key in SKIPPED_KEYS),
        counts=clean,
        warnings=describe_counts(clean),
        files=tuple(f.path for f in files),
    )


# -- a capture read a file at a time (the Spark engine's ingest tasks) ----------------------


def read_capture_file(
    file: CaptureFile,
    out_dir: Path,
    *,
    base: int = 0,
    skip: frozenset[str] = frozenset(),
    replica_header: str | None = None,
    client_header: str | None = None,
    batch_events: int = DEFAULT_BATCH_EVENTS,
) -> ReadPart:
    """One file of a capture (`plan` order; `base`: the position of its first line in its
    run), but for the lines of the flows in `skip`: those that continue in another file, which
    `analyzer.ingest.flowlines` reads whole. Its tables are written to `out_dir` as
    `read_capture` writes them; `capture_report` merges the parts."""
    task = _Task((file,), 0, 1, str(out_dir), "c", replica_header, client_header,
                 batch_events, skip, base)  # fmt: skip
    return _scan(task)
