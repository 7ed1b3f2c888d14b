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
import json
import os
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
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
    UnsupportedSchema,
    describe_counts,
    os_reason,
    paused_gc,
)
from analyzer.normalize import DEFAULT_BATCH_EVENTS, BulkDescription, Normalizer, SseRun
from analyzer.records import SCHEMA_MAJOR, SCHEMA_MINOR
from analyzer.schema import INT32_END, INT64_END

__all__ = [
    "PARALLEL_MIN_BYTES",
    "capture_files",
    "is_capture_file",
    "read_capture",
    "record_problem",
]

# Below this much input a process pool costs more (interpreter start, imports) than it saves.
PARALLEL_MIN_BYTES = 24 << 20
_READ_BLOCK = 16 << 20
_BOM = b"\xef\xbb\xbf"
_FLOW_KEY = b'"flow":'
_HOW = frozenset({"complete", "client_closed", "server_closed", "error", "open_at_shutdown"})
# Integer fields land in Int64 (seq, ts_ns, truncated_bytes) and Int32 (chunk n, status)
# columns: a value past their range is no record the writer could have written. `_check` spells
# the hot path's bounds as literals (0x7FFF_FFFF_FFFF_FFFF is INT64_END - 1): a global costs a
# lookup.


def is_capture_file(path: Path) -> bool:
    """True for `*.jsonl` and `*.jsonl.partial` names."""
    name = path.name
    return name.endswith(".jsonl") or name.endswith(".jsonl.partial")


def capture_files(path: Path) -> list[Path]:
    """The capture files an input path names: itself, or the capture files in a directory."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and is_capture_file(p))
        if not files:
            raise UnreadableInput(f"{path}: no capture files (*.jsonl, *.jsonl.partial)")
        return files
    if path.is_file():
        return [path]
    raise UnreadableInput(f"{path}: no such file or directory")


@dataclass(frozen=True)
class _File:
    path: str
    run: str  # run_id, or a stand-in when the file has no readable capture_open
    run_id: str | None
    client_header: str | None  # the proxy's --client-header, from capture_open
    file_index: int
    first_ts: int
    size: int


@dataclass
class _Run:
    """Per-run bookkeeping of one worker."""

    breaks: list[tuple[int, int]] = field(default_factory=list)  # (position, seq)
    offset: int | None = None
    last: tuple[int, int] | None = None
    closed: bool = False
    dropped: int = 0
    addon_errors: int = 0


@dataclass(frozen=True)
class _Task:
    files: tuple[_File, ...]
    part: int
    parts: int
    out_dir: str
    prefix: str
    replica_header: str | None
    client_header: str | None
    batch_events: int


@dataclass
class _Result:
    counts: Counter[str]
    records: int
    runs: dict[str, _Run]
    bytes_read: int


def _version_number(text: str) -> int | None:
    """A schema version part: ASCII digits (`str.isdigit` also takes "²"), short enough for
    `int()` (which refuses 4300 digits and more)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _schema_major(path: str, schema: object) -> tuple[int, int]:
    text = schema if isinstance(schema, str) else ""
    major_text, _, minor_text = text.partition(".")
    major = _version_number(major_text)
    if major is None:
        raise UnsupportedSchema(f"{path}: capture schema {schema!r} is not MAJOR.MINOR")
    if major != SCHEMA_MAJOR:
        raise UnsupportedSchema(
            f"{path}: capture schema {text} is not supported "
            f"(this seamwatch reads schema {SCHEMA_MAJOR}.x)"
        )
    return major, _version_number(minor_text) or 0


def _head(path: Path) -> tuple[dict[str, Any] | None, int]:
    """The file's first record when it parses, and the file size."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        line = fh.readline(1 << 20)
    if line.startswith(_BOM):
        line = line[3:]
    try:
        first = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for json
        return None, size
    return (first if isinstance(first, dict) else None), size


def _plan(
    files: Sequence[Path], counts: Counter[str], cuts: dict[str, int] | None = None
) -> list[_File]:
    """Order files by run (first capture_open time) and rotation index; drop duplicates.

    `cuts` gets, per run, the last seq that retention deleted, as capture_open records it.
    """
    planned: dict[tuple[str, int], _File] = {}
    for path in files:
        first, size = _head(path)
        if cuts is not None and first is not None:
            _retention_cuts(first, cuts)
        # A run id holding a lone surrogate (a leniently read line) cannot name the run's rows.
        if (
            first is not None
            and first.get("kind") == "capture_open"
            and _text_ok(first.get("run_id"))
        ):
            _, minor = _schema_major(str(path), first.get("schema"))
            if minor > SCHEMA_MINOR:
                counts["newer_minor"] += 1
            run = str(first.get("run_id"))
            index = first.get("file_index")
            file_index = index if isinstance(index, int) else 0
            ts = first.get("ts_ns")
            header = first.get("client_header")
            entry = _File(
                str(path),
                run,
                run,
                header if isinstance(header, str) else None,
                file_index,
                ts if isinstance(ts, int) else 0,
                size,
            )
        else:
            if size:
                counts["missing_open"] += 1
            entry = _File(str(path), f"?{path.name}", None, None, 0, 0, size)
        key = (entry.run, entry.file_index)
        other = planned.get(key)
        if other is not None:
            # The same rotation of a run twice (a `.partial` left beside its renamed file):
            # keep the finished one, else the longer.
            counts["duplicate_file"] += 1
            if (other.path.endswith(".partial"), -other.size) <= (
                entry.path.endswith(".partial"),
                -entry.size,
            ):
                continue
        planned[key] = entry
    run_start: dict[str, int] = {}
    for entry in planned.values():
        run_start[entry.run] = min(run_start.get(entry.run, entry.first_ts), entry.first_ts)
    return sorted(planned.values(), key=lambda f: (run_start[f.run], f.run, f.file_index, f.path))


def _retention_cuts(first: dict[str, Any], cuts: dict[str, int]) -> None:
    """Merge a capture_open's `retention.cut` (schema 1.3: per run, every record up to that
    seq was deleted by --max-size / --max-age) into `cuts`."""
    retention = first.get("retention")
    cut = retention.get("cut") if isinstance(retention, dict) else None
    if isinstance(cut, dict):
        for run, seq in cut.items():
            if type(seq) is int and isinstance(run, str):
                cuts[run] = max(cuts.get(run, -1), seq)


def _route(line: bytes, parts: int) -> int:
    """The worker owning a line: by a stable hash of its flow id, 0 when it has none."""
    i = line.find(_FLOW_KEY)
    if i < 0:
        return 0
    # Inside a JSON string every '"' is escaped, so an unescaped `"flow":` is the record's
    # own top-level key (no nested object of schema 1 has a "flow" member).
    j = i + len(_FLOW_KEY)
    while line[j : j + 1] == b" ":
        j += 1
    if line[j : j + 1] != b'"':
        return 0
    k = line.find(b'"', j + 1)
    return zlib.crc32(line[j + 1 : k]) % parts


_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "capture_open": (("schema", str), ("run_id", str)),
    "request": (("flow", str), ("method", str), ("path", str), ("headers", list)),
    "response": (("flow", str), ("status", int), ("headers", list)),
    "chunk": (("flow", str), ("n", int), ("data", dict)),
    "stream_end": (("flow", str), ("how", str)),
    "server_unreachable": (("upstream", str),),
    "capture_stats": (),
    "capture_close": (),
}

# Fields a record may leave out or set to null, else a string (they reach String columns).
_OPTIONAL_TEXT: dict[str, tuple[str, ...]] = {
    "request": ("scheme", "authority", "client", "upstream"),
    "response": ("replica", "replica_source"),
    "stream_end": ("error",),
    "server_unreachable": ("flow", "error"),
}


def _body_ok(body: object) -> bool:
    if body is None:
        return True
    if type(body) is not dict:
        return False
    text = body.get("text")
    if text is not None:
        return type(text) is str
    return type(body.get("b64")) is str


def _headers_ok(headers: list[Any]) -> bool:
    for item in headers:
        if type(item) is not list or len(item) != 2:
            return False
        if type(item[0]) is not str or type(item[1]) is not str:
            return False
    return True


def _check(record: object) -> str | None:
    """Why a parsed line is no usable schema-1 record (a DAMAGE key), None when it is one."""
    if type(record) is not dict:
        return "invalid_record"
    kind = record.get("kind")
    required = _REQUIRED.get(kind) if type(kind) is str else None
    if required is None:
        return "unknown_kind" if type(kind) is str else "invalid_record"
    seq = record.get("seq")
    ts = record.get("ts_ns")
    if (
        type(seq) is not int
        or type(ts) is not int
        or not 0 <= seq <= 0x7FFF_FFFF_FFFF_FFFF
        or not -0x8000_0000_0000_0000 <= ts <= 0x7FFF_FFFF_FFFF_FFFF
    ):
        return "invalid_record"
    for name, expected in required:
        if type(record.get(name)) is not expected:
            return "invalid_record"
    if kind == "chunk":
        data = record["data"]
        if not _body_ok(data) or data is None or not 0 <= record["n"] <= 0x7FFF_FFFF:
            return "invalid_record"
        return _truncated_problem(data)
    for name in _OPTIONAL_TEXT.get(record["kind"], ()):  # a str, as `required` was found
        value = record.get(name)
        if value is not None and type(value) is not str:
            return "invalid_record"
    if kind == "request" or kind == "response":
        body = record.get("body")
        if not _headers_ok(record["headers"]) or not _body_ok(body):
            return "invalid_record"
        if kind == "response" and not -INT32_END <= record["status"] < INT32_END:
            return "invalid_record"
        if body is not None and _truncated_problem(body) is not None:
            return "invalid_record"
    elif kind == "stream_end" and record["how"] not in _HOW:
        return "invalid_record"
    return None


def _truncated_problem(body: dict[str, Any]) -> str | None:
    """A body's (or chunk's) `truncated_bytes`, when present, must be a count in Int64."""
    truncated = body.get("truncated_bytes")
    if truncated is None or (type(truncated) is int and 0 <= truncated < INT64_END):
        return None
    return "invalid_record"


def _text_ok(value: object) -> bool:
    """True when every string in a JSON value (keys too) is valid Unicode: no lone surrogate,
    which JSON's `\\udXXX` escapes can make and which no UTF-8 (so no Polars column) can hold."""
    stack = [value]  # not recursive: a leniently read line may nest up to json's own limit
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)  # the keys
            stack.extend(item.values())
    return True


def record_problem(record: object) -> str | None:
    """`_check`, and for a record that may hold lone surrogates (one a lenient parser read, or
    one a reader made from a HAR file or a dump), a string other than its payload text that
    holds one makes it malformed ("invalid_record").

    Flow ids, methods, paths, header values, replicas and error texts are names the analysis
    joins and compares on: repaired (U+FFFD) they could silently merge distinct values, so the
    record is skipped and counted instead. Payload text (`body`, chunk `data`) is kept: it is
    the bytes on the wire, which normalize records as they are (DESIGN.md §4).
    """
    problem = _check(record)
    if problem is not None:
        return problem
    assert type(record) is dict  # _check passed
    for name, value in record.items():
        if name != "body" and name != "data" and not _text_ok(value):
            return "invalid_record"
    return None


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


def _scan(task: _Task) -> _Result:
    """One worker: read every line of every file, handle the lines this worker owns."""
    with paused_gc():
        return _scan_files(task)


def _scan_files(task: _Task) -> _Result:
    normalizer = Normalizer(
        replica_header=task.replica_header,
        client_header=task.client_header,
        batch_events=task.batch_events,
    )
    writer = PartWriter(Path(task.out_dir), f"{task.prefix}{task.part}")
    counts: Counter[str] = Counter()
    runs: dict[str, _Run] = {}
    positions: dict[str, int] = {}
    seen_other: set[tuple[str, int]] = set()  # (run, seq) of records without a flow
    parts = task.parts
    part = task.part
    from_json = pydantic_core.from_json
    add = normalizer.add
    batch = task.batch_events
    bytes_read = 0

    for file in task.files:
        run = runs.setdefault(file.run, _Run())
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
                block_lane.read(lines, parts, part)
                if normalizer.pending_events() >= batch:
                    writer.write(normalizer.drain())
                _report_progress(part, bytes_read - len(carry))
            if carry:
                # The file does not end with a line end: the writer stopped mid-line.
                position = pos
                pos += 1
                if parts == 1 or _route(carry, parts) == part:
                    if first_line and carry.startswith(_BOM):
                        counts["bom"] += 1
                        carry = carry[3:]
                    record = _parse(carry, True, counts, from_json)
                    if record is not None:
                        _take(record, position, file, run, counts, seen_other, add)
        positions[file.run] = pos
    writer.write(normalizer.finish())
    counts.update(normalizer.counts)
    return _Result(counts, normalizer.records, runs, bytes_read)


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
        run: _Run,
        file: _File,
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

    def read(self, lines: list[bytes], parts: int, part: int) -> None:
        sieved: list[int] = []
        slow: list[int] = []
        for index, line in enumerate(lines):
            if parts > 1 and _route(line, parts) != part:
                continue
            if bulk.looks_like_chunk(line) and (index or not self.first_line):
                sieved.append(index)
            else:
                slow.append(index)
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
        events = events.with_columns(
            pl.Series("data_hash", described.data_hash, pl.String),
            pl.Series("data_bytes", described.data_bytes, pl.Int64),
            pl.Series("payload_hash", described.payload_hash, pl.String),
            pl.Series("result_version", described.result_version, pl.String),
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
            if index == 0 and self.first_line and line.startswith(_BOM):
                self.counts["bom"] += 1
                line = line[3:]
            record = _parse(line, False, self.counts, pydantic_core.from_json)
            if record is None:
                continue
            flow_id = record.get("flow")
            if type(flow_id) is str and flow_id in self.pending:
                self._resolve(flow_id, index, queue)
            _take(record, self.base + index, self.file, self.run, self.counts,
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
        """Capture health of the block's records (`_mark_seq`), in line order."""
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
            _mark_seq(self.run, position, seq)

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
        self.normalizer.add_payloads(carried["data_hash"].to_list(), carried["data"].to_list())


def _parse(
    line: bytes, torn: bool, counts: Counter[str], from_json: Callable[..., Any]
) -> dict[str, Any] | None:
    """The record on a line, or None (counted) when the line is unusable."""
    check = _check
    try:
        record = from_json(line, allow_inf_nan=False, cache_strings="keys")
    except ValueError:
        if not line.strip():
            counts["blank_line"] += 1
            return None
        if torn:
            counts["torn_line"] += 1
            return None
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            counts["invalid_utf8"] += 1
            return None
        try:
            # Lone surrogates or NaN: not the strict JSON the writer promises, still readable.
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for json
            counts["corrupt_line"] += 1
            return None
        counts["nonstrict_json"] += 1
        # Only this lenient parser lets lone surrogates through: they are checked for here,
        # off the fast path (pydantic-core and orjson refuse them).
        check = record_problem
    problem = check(record)
    if problem is not None:
        counts[problem] += 1
        return None
    result: dict[str, Any] = record
    return result


def _take(
    record: dict[str, Any],
    position: int,
    file: _File,
    run: _Run,
    counts: Counter[str],
    seen_other: set[tuple[str, int]],
    add: Callable[[dict[str, Any]], None],
    mark: Callable[[tuple[int, int]], None] | None = None,
) -> None:
    kind = record["kind"]
    seq = record["seq"]
    if "flow" not in record or record["flow"] is None:
        key = (file.run, seq)
        if key in seen_other:
            counts["duplicate_record"] += 1
            return
        seen_other.add(key)
        if kind == "capture_open":
            _schema_major(file.path, record["schema"])
        elif kind == "capture_close" or kind == "capture_stats":
            if kind == "capture_close":
                run.closed = True
            dropped = record.get("dropped")
            errors = record.get("addon_errors")
            if type(dropped) is int:
                run.dropped = max(run.dropped, dropped)
            if type(errors) is int:
                run.addon_errors = max(run.addon_errors, errors)
    if mark is None:
        _mark_seq(run, position, seq)
    else:
        mark((position, seq))
    try:
        add(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        counts["invalid_record"] += 1


def _mark_seq(run: _Run, position: int, seq: int) -> None:
    """Capture health: `seq` minus line position is constant while nothing is lost; keep only
    the places where it changes (merged across workers by the parent)."""
    offset = seq - position
    if offset != run.offset:
        run.offset = offset
        run.breaks.append((position, seq))
    run.last = (position, seq)


def _missing_records(runs: Sequence[_Run]) -> int:
    """Records lost on disk in one run, from the workers' (position, seq) change points."""
    points = sorted({p for run in runs for p in [*run.breaks, *([run.last] if run.last else [])]})
    if not points:
        return 0
    missing = max(0, points[0][1] - points[0][0])
    previous = points[0][1] - points[0][0]
    for position, seq in points[1:]:
        offset = seq - position
        if offset > previous:
            missing += offset - previous
        previous = offset
    return missing


def _run(
    tasks: list[_Task], out_dir: Path, progress: Callable[[int], None] | None
) -> list[_Result]:
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
        files = _plan(capture_files(path), counts, cuts)
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
    records = 0
    by_run: dict[str, list[_Run]] = {}
    for result in results:
        counts.update(result.counts)
        records += result.records
        for name, run in result.runs.items():
            by_run.setdefault(name, []).append(run)
    for name, runs in by_run.items():
        missing = _missing_records(runs)
        # Records retention deleted (seq 0 up to the cut) are a note, not a loss.
        cut = min(missing, cuts.get(name, -1) + 1)
        counts["retention_deleted"] += cut
        counts["seq_gap"] += missing - cut
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
