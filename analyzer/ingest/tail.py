"""Follow a growing capture: each poll reads only the bytes appended since the last one.

A running proxy appends records to its `*.jsonl.partial` file and renames it to `*.jsonl` on
rotation and close (DESIGN.md §4). `CaptureTail` keeps, per file, the byte offset up to which
it has read (a renamed file keeps its inode, so it keeps its offset), feeds the new complete
lines to one persistent `Normalizer` in capture order (the order `lines.plan` gives), with the
line parsing and damage counting of `analyzer.ingest.jsonl`, and writes the normalized rows it
drains to Parquet parts in a private folder (`analyzer.ingest.parts`): memory holds the
normalizer's state, not the rows read. Which files it reads, and in what order, is
`analyzer.ingest.tracking`. Its `tables()` are the normalized tables of everything read so
far, scans of those parts; flows still open show their events through `Normalizer.snapshot()`.
The tail returns tables, not a timeline: its caller builds that
(`analyzer.analysis.LiveTimeline`), so ingest never imports the transform.

What is built from the tables keeps the part files they scan (and the spill folder handed with
them) while it holds `TailTables.keep`, even after later polls compacted or dropped them, a
restart, or `close()`: the folder is removed once neither the tail nor anything built from its
tables needs it, and at interpreter exit.

The contract: after every poll, the timeline built from `tables()` equals what `read_timeline`
builds from the same files (tests/ingest/test_tail.py checks it frame by frame). A torn last
line is not read until its line end arrives; meanwhile it is counted as a full read would count
it. When the files change in a way appending cannot explain (a file shrinks, vanishes, is
replaced, gains bytes after a later file was read, or a new file sorts before one already
read), the tail starts over from the beginning: still exact, only slower. A poll that finds no
new bytes only lists and stats the files.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pydantic_core

from analyzer import schema as S
from analyzer.ingest import tracking
from analyzer.ingest.common import (
    SKIPPED_KEYS,
    InputReport,
    UnreadableInput,
    describe_counts,
)
from analyzer.ingest.lines import (
    BOM,
    RunState,
    capture_files,
    count_missing,
    parse_line,
    take_record,
)
from analyzer.ingest.parts import MAX_SMALL, SMALL_BYTES, Part, SpillFolder, Store, write_part
from analyzer.ingest.tracking import Tracked, Unready
from analyzer.normalize import NormalizedFrames, Normalizer

__all__ = ["CaptureTail", "PollResult", "TailTables"]

_READ_BLOCK = 16 << 20


@dataclass(frozen=True)
class PollResult:
    """What one poll did."""

    changed: bool  # the tables differ from the previous poll's
    bytes_read: int  # bytes read from the files by this poll
    records: int  # records taken by this poll
    restarted: bool  # the files changed in a way appending cannot explain: read all again


@dataclass(frozen=True)
class TailTables:
    """The normalized tables of everything a tail read so far, as lazy scans of its parts.

    `scans`: one per `analyzer.schema.RAW_TABLES` table, the fields of
    `analyzer.timeline.RawTables` (flows carry the `input` column, 0; payloads deduplicated);
    `payload_rows`: the payload parts as stored. `spill_dir`: a fresh folder in the tail's
    private folder for what is built from them. Whatever scans them must hold `keep` (the part
    files and that folder) as long as it lives: they are deleted once nothing holds them.
    """

    version: int  # the tail's `version` they show
    scans: Mapping[str, pl.LazyFrame]
    payload_rows: pl.LazyFrame | None
    report: InputReport
    spill_dir: Path
    keep: tuple[object, ...]


class CaptureTail:
    """Incremental reader of one capture directory (or file) that a proxy is still writing.

    `poll()` reads what was appended; `tables()` and `report()` describe everything read so
    far. Safe to share between threads (the Live page of several browser tabs): calls are
    serialized by a lock. The rows read are kept in Parquet parts in a private temporary folder;
    `close()` lets it go (a later poll reads everything again into a new one).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        replica_header: str | None = None,
        client_header: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.replica_header = replica_header
        self.client_header = client_header
        self.version = 0  # bumped by every poll that changes what the tables hold
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._start()

    def _start(self) -> None:
        self._normalizer = Normalizer(
            replica_header=self.replica_header, client_header=self.client_header
        )
        self._files: list[Tracked] = []  # in read order
        self._unready: dict[str, Unready] = {}  # path -> (size, mtime, how it counts)
        self._ignored: dict[tuple[int, int], int] = {}  # duplicate files left out -> size
        self._counts: Counter[str] = Counter()  # plan and line damage so far
        self._runs: dict[str, RunState] = {}
        self._cuts: dict[str, int] = {}  # per run, the last seq the proxy's retention deleted
        self._positions: dict[str, int] = {}
        self._seen_other: set[tuple[str, int]] = set()
        # The Parquet parts of the rows drained so far, per table, in the order written. The
        # files of an earlier start stay while what was built from them holds them.
        self._parts: dict[str, list[Part]] = {table: [] for table in S.RAW_TABLES}

    def close(self) -> None:
        """Let go of the rows read and the private folder (removed once nothing built from its
        tables still holds it). A later poll reads everything again."""
        with self._lock:
            self._start()
            self._store = None
            self.version += 1  # what it shows now (nothing) is not what it showed

    # -- polling ----------------------------------------------------------------------------

    def poll(self) -> PollResult:
        """Read what was appended since the last poll.

        Raises `UnreadableInput` when the path holds no capture file (yet) or cannot be read.
        """
        with self._lock:
            try:
                return self._poll()
            except OSError as e:
                raise UnreadableInput(f"{self.path}: {e.strerror or e}") from e

    def _poll(self) -> PollResult:
        listed = self._stat_all()
        if listed is None:  # a file vanished between listing and stat (a rename): next time
            return PollResult(False, 0, 0, False)
        attempt = self._advance(listed)
        restarted = attempt is None
        if attempt is None:
            self._start()
            attempt = self._advance(listed)
            if attempt is None:  # pragma: no cover - a fresh start contradicts nothing
                raise AssertionError("a fresh tail cannot conflict with the files")
        bytes_read, records, changed = attempt
        changed = changed or restarted
        if changed:
            self.version += 1
        return PollResult(changed, bytes_read, records, restarted)

    def _advance(
        self, listed: Sequence[tuple[Path, os.stat_result]]
    ) -> tuple[int, int, bool] | None:
        """Match the files and read their new bytes; None when reading must start over."""
        layout = tracking.layout(
            listed, self._files, self._ignored, self._unready, self._cuts, self._counts
        )
        if layout is None:
            return None
        order, unready, ignored, renamed = layout
        try:
            bytes_read, records, changed = self._read(order)
        except _Restart:
            return None
        except BaseException:
            self._start()  # read partly (an I/O error): the next poll reads all again
            raise
        changed = changed or renamed or unready != self._unready
        self._files = order
        self._unready = unready
        self._ignored = ignored
        return bytes_read, records, changed

    def _stat_all(self) -> list[tuple[Path, os.stat_result]] | None:
        out = []
        for path in capture_files(self.path):
            try:
                out.append((path, path.stat()))
            except FileNotFoundError:
                return None
        return out

    def _read(self, order: list[Tracked]) -> tuple[int, int, bool]:
        """Read the new bytes of every file in order: (bytes, records, changed).

        Raises `_Restart` when bytes came to a file after a later file was read.
        """
        total = 0
        records_before = self._normalizer.records
        changed = False
        for index, entry in enumerate(order):
            later = order[index + 1 :]
            grown = entry.size != entry.read_size
            if entry.sealed:
                if grown:
                    raise _Restart
                continue
            if grown:
                if any(f.offset > 0 for f in later):
                    raise _Restart
                total += self._read_file(entry)
                changed = True
            if entry.pending and any(f.size > 0 for f in later):
                # Another file goes on after this one's torn tail: take it as torn, as a full
                # read does at the end of every file.
                self._seal(entry)
                changed = True
        if changed:
            self._store_rows(self._normalizer.drain())
        return total, self._normalizer.records - records_before, changed

    def _store_rows(self, frames: NormalizedFrames) -> None:
        """Write drained rows as a part per table (then merge the table's small trailing parts)."""
        if self._store is None:
            self._store = Store()
        store = self._store
        for table in S.RAW_TABLES:
            frame: pl.DataFrame = getattr(frames, table)
            if frame.height == 0:
                continue
            path = store.part_path(table)
            write_part(frame, path)
            parts = self._parts[table]
            parts.append(Part(store, path, frame.height))
            small = 0
            for part in reversed(parts):
                if part.size >= SMALL_BYTES:
                    break
                small += 1
            if small > MAX_SMALL:
                merged = parts[-small:]
                path = store.part_path(table)
                pl.scan_parquet([p.path for p in merged], schema=S.RAW_TABLES[table]).sink_parquet(
                    path, compression="zstd", compression_level=1, statistics=True
                )
                os.chmod(path, 0o600)
                # The merged files go when no Timeline scans them any more.
                parts[-small:] = [Part(store, path, sum(p.rows for p in merged))]

    def _read_file(self, entry: Tracked) -> int:
        """Take the complete lines appended to one file; keep its unterminated tail pending."""
        file = entry.plan
        run = self._runs.setdefault(file.run, RunState())
        pos = self._positions.get(file.run, 0)
        counts = self._counts
        seen_other = self._seen_other
        add = self._normalizer.add
        from_json = pydantic_core.from_json
        self._normalizer.set_run(file.run_id, file.client_header)
        first_line = entry.offset == 0
        read = 0
        carry = b""
        with open(file.path, "rb") as fh:
            fh.seek(entry.offset)
            remaining = entry.size - entry.offset
            while remaining > 0:
                block = fh.read(min(_READ_BLOCK, remaining))
                if not block:
                    break
                remaining -= len(block)
                read += len(block)
                if entry.open_line:
                    # A record was taken before its line end came: only the line end may follow.
                    if not block.startswith(b"\n"):
                        raise _Restart
                    entry.open_line = False
                    block = block[1:]
                if carry:
                    block = carry + block
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry = block
                    continue
                carry = block[cut + 1 :]
                for line in block[:cut].split(b"\n"):
                    position = pos
                    pos += 1
                    if first_line:
                        first_line = False
                        if line.startswith(BOM):
                            counts["bom"] += 1
                            line = line[3:]
                    record = parse_line(line, False, counts, from_json)
                    if record is not None:
                        take_record(record, position, file, run, counts, seen_other, add)
                if self._normalizer.pending_events() >= self._normalizer.batch_events:
                    self._store_rows(self._normalizer.drain())
        self._positions[file.run] = pos
        entry.offset += read - len(carry)
        entry.read_size = entry.offset + len(carry)
        entry.pending = Counter()
        if carry:
            self._tail_line(entry, carry, at_start=first_line)
        return read

    def _tail_line(self, entry: Tracked, carry: bytes, *, at_start: bool) -> None:
        """An unterminated last line: take it when it parses (a full read does too), else
        count it as a full read would and wait for the rest."""
        probe: Counter[str] = Counter()
        line = carry
        if at_start and line.startswith(BOM):
            probe["bom"] += 1
            line = line[3:]
        record = parse_line(line, True, probe, pydantic_core.from_json)
        if record is None:
            entry.pending = probe
            return
        file = entry.plan
        run = self._runs.setdefault(file.run, RunState())
        pos = self._positions.get(file.run, 0)
        self._counts.update(probe)
        take_record(record, pos, file, run, self._counts, self._seen_other, self._normalizer.add)
        self._positions[file.run] = pos + 1
        entry.offset = entry.read_size
        entry.open_line = True

    def _seal(self, entry: Tracked) -> None:
        """The file's torn tail stays torn: count it for good, as the end of a file's read."""
        self._counts.update(entry.pending)
        entry.pending = Counter()
        self._positions[entry.plan.run] = self._positions.get(entry.plan.run, 0) + 1
        entry.offset = entry.read_size
        entry.sealed = True

    # -- results ----------------------------------------------------------------------------

    @property
    def folder(self) -> Path | None:
        """The private folder (0700) holding the rows read so far as Parquet parts; None until
        something was read, and after `close()`."""
        with self._lock:
            return None if self._store is None else self._store.path

    @property
    def files(self) -> tuple[tuple[str, int, int], ...]:
        """Name, size and mtime (ns) of the files at the last poll, in read order (files whose
        first line is still being written last)."""
        with self._lock:
            read = [(Path(f.plan.path).name, f.size, f.mtime_ns) for f in self._files]
            started = [(Path(p).name, size, mtime) for p, (size, mtime, _) in self._unready.items()]
            return tuple(read + started)

    def report(self) -> InputReport:
        """The input report of everything read so far, counted as a full read counts it."""
        with self._lock:
            return self._report()

    def _report(self) -> InputReport:
        counts = Counter(self._counts)
        counts.update(self._normalizer.counts)
        for entry in self._files:
            counts.update(entry.pending)
        for _, _, pending in self._unready.values():
            counts.update(pending)
        for name, run in self._runs.items():
            count_missing([run], self._cuts.get(name, -1), counts)
            if not run.closed:
                counts["missing_close"] += 1
            counts["writer_dropped"] += run.dropped
            counts["addon_errors"] += run.addon_errors
        # A planned file that nothing was read from yet still makes a run for a full read.
        counts["missing_close"] += len({f.plan.run for f in self._files} - set(self._runs))
        clean = {key: n for key, n in sorted(counts.items()) if n}
        return InputReport(
            path=str(self.path),
            kind="capture",
            records=self._normalizer.records,
            skipped=sum(n for key, n in clean.items() if key in SKIPPED_KEYS),
            counts=clean,
            warnings=describe_counts(clean),
            files=tuple(f.plan.path for f in self._files) + tuple(self._unready),
        )

    def frames(self) -> NormalizedFrames:
        """The normalized tables of everything read so far; open flows included (read into
        memory from the parts: for tests and small captures)."""
        with self._lock:
            scans, _ = self._scans()
            tables = {name: scans[name].collect() for name in S.RAW_TABLES}
        tables["payloads"] = tables["payloads"].unique(
            "data_hash", keep="first", maintain_order=True
        )
        return NormalizedFrames(**tables)

    def _scans(self) -> tuple[dict[str, pl.LazyFrame], pl.LazyFrame | None]:
        """Scans of the parts written so far (as `analysis.raw_tables` scans a cache entry),
        the open flows' rows added to the flows; and the payload parts as stored."""
        scans: dict[str, pl.LazyFrame] = {}
        for table, schema in S.RAW_TABLES.items():
            files = [part.path for part in self._parts[table]]
            scans[table] = (
                pl.scan_parquet(files, schema=schema) if files else S.empty(schema).lazy()
            )
        open_flows = self._normalizer.snapshot()
        flows = scans["flows"]
        if open_flows.height:
            flows = pl.concat([flows, open_flows.lazy()], how="vertical")
        scans["flows"] = flows.with_columns(pl.lit(0, pl.Int32).alias("input"))
        scans["payloads"] = scans["payloads"].unique("data_hash", keep="any")
        payload_files = [part.path for part in self._parts["payloads"]]
        payload_rows = pl.scan_parquet(payload_files, schema=S.PAYLOADS) if payload_files else None
        return scans, payload_rows

    def tables(self) -> TailTables:
        """The tables of everything read so far, with a fresh spill folder and what to hold
        while they are scanned (see `TailTables`)."""
        with self._lock:
            if self._store is None:
                self._store = Store()
            spill = SpillFolder(self._store)
            parts = tuple(part for table in S.RAW_TABLES for part in self._parts[table])
            scans, payload_rows = self._scans()
            return TailTables(
                version=self.version,
                scans=scans,
                payload_rows=payload_rows,
                report=self._report(),
                spill_dir=spill.path,
                keep=(parts, spill),
            )


class _Restart(Exception):
    """The files changed in a way appending cannot explain (bytes came to a file after a later
    one was read, or a record taken before its line end was followed by more than the line
    end): read everything again."""
