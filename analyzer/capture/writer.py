"""The capture writer: a thread that turns queued records into rotated JSONL files (DESIGN.md §4).

The proxy's event loop only calls `submit`, which puts the record on a bounded queue and
returns; serialization, `seq`, rotation and fsync happen on the writer's own thread, so a slow
disk costs dropped records (counted), never a stalled stream. Decisions, made here on purpose:

- `seq` is given at write time and counts every record of the run, across files: a record
  dropped at the queue leaves no gap (the `dropped` counter says so), a gap on disk is loss
  after the queue (a failed write, counted in `addon_errors`).
- Counters cover submitted records only: `seen` (every `submit`), `written` (those that reached
  the file before the `capture_stats`/`capture_close` that reports them), `dropped` (queue full,
  submitted after `close`, or given up after failed writes). The writer's own records
  (`capture_open`, `capture_stats`, `capture_close`) count in none, so after a clean close
  `seen == written + dropped`. `addon_errors` adds the addon's `count_error` calls to the
  writer's own errors (bad record, repaired surrogates, failed I/O).
- Every batch is written with `os.write` as soon as it is drained, so SIGKILL (the kernel keeps
  the page cache) loses only what was still queued; `fdatasync` (power loss) runs at most every
  `flush_interval_s` while data is unsynced, and at rotation and close.
- A caller that does nothing but record (the capture worker process) starts the writer inline:
  no thread and no queue, `submit` serializes at once and the caller's `pump` writes, syncs and
  writes `capture_stats` when due, and says by when to call it again. The same files, seq and
  counters; no GIL handed back and forth between two threads of one process.
- A file is rotated before the record that would take it past `rotate_bytes`, unless it holds
  no record yet beside its `capture_open` (a single huge record gets a file to itself).
- Serialization is `pydantic_core.to_json`, compact like `json.dumps(separators=(",", ":"),
  ensure_ascii=False)` and faster; a record it refuses goes through `json.dumps`,
  and text holding lone surrogates (which have no UTF-8 form) is repaired: surrogate pairs
  joined, lone ones replaced by U+FFFD, and the repair counted as an error. A caller that
  serializes records itself, as `to_json` would, hands them over a list at a time
  (`submit_encoded`): one queue item instead of one per record.
- Files and what happens to them (created private, the hold after a failed write, rotation,
  retention) are `CaptureFiles`' (`analyzer.capture.files`), the writer's base.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from pydantic import ValidationError

from analyzer.capture.files import (
    SEQ_LINE,
    CaptureError,
    CaptureFiles,
    make_capture_dir,
    prepare_capture_dir,
    stamp,
    with_seq,
)
from analyzer.capture.retention import Retention
from analyzer.record_models import RECORD_ADAPTER

__all__ = ["CaptureError", "CaptureWriter", "make_capture_dir", "prepare_capture_dir"]

log = logging.getLogger(__name__)

# A run id goes into file names: keep it to characters that cannot leave the folder.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_RESERVED = frozenset({"kind", "seq", "ts_ns", "mono_ns", "file_index"})
# Records per write: bounds the memory of one batch and the time between two writes.
_DRAIN_PAUSE_S = 0.02
_BATCH_MAX = 4096
# How often records held after a failed write are tried again.
_RETRY_S = 0.5
_CLOSE: Final = object()
_ROTATE: Final = object()


class _Encoded(list[bytes]):
    """A list of records serialized by the caller (`submit_encoded`), as one queue item."""


class CaptureWriter(CaptureFiles):
    """Writes records from a bounded queue to rotated capture files, on its own thread."""

    def __init__(
        self,
        out_dir: Path,
        *,
        open_fields: dict[str, object],
        rotate_bytes: int = 64 * 2**20,
        queue_max: int = 65536,
        flush_interval_s: float = 0.2,
        stats_interval_s: float = 5.0,
        close_timeout_s: float = 60.0,
        hold_bytes: int = 32 * 2**20,
        retention: Retention | None = None,
    ) -> None:
        if rotate_bytes < 1 or queue_max < 1:
            raise ValueError("rotate_bytes and queue_max must be positive")
        if flush_interval_s <= 0 or stats_interval_s <= 0:
            raise ValueError("flush_interval_s and stats_interval_s must be positive")
        reserved = _RESERVED.intersection(open_fields)
        if reserved:
            raise ValueError(f"open_fields must not set {sorted(reserved)}: the writer does")
        run_id = open_fields.get("run_id")
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run_id must match {_RUN_ID.pattern}, got {run_id!r}")
        try:  # fail at construction, not in every file's first line
            RECORD_ADAPTER.validate_python(
                {"kind": "capture_open", "seq": 0, "ts_ns": 0, "mono_ns": 0, "file_index": 0}
                | open_fields
            )
        except ValidationError as e:
            raise ValueError(f"open_fields do not make a valid capture_open: {e}") from e
        self.out_dir = Path(out_dir)
        self._open_fields = dict(open_fields)
        self._run_id = run_id
        self._rotate_bytes = rotate_bytes
        self._queue_max = queue_max
        self._flush_interval = flush_interval_s
        self._stats_interval = stats_interval_s
        self._close_timeout = close_timeout_s
        self._hold_bytes = hold_bytes
        self._retention = retention
        # Per run, the last seq that retention deleted (cumulative: each capture_open says all).
        self._cut: dict[str, int] = {}
        self.files_deleted = 0
        self._age_stuck = False
        # SimpleQueue is C and lock-light; its bound is the qsize check in submit.
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._inline = False  # `start(inline=True)`: the caller's thread writes (`pump`)
        self._started = False
        self._stats_due = 0.0
        # Counters with one writer each, so no lock: the caller's thread...
        self._seen = 0
        self._dropped = 0
        self._redacted = 0
        self._addon_errors = 0
        self._unclean = False
        # ... and the writer's.
        self._written = 0
        self._writer_errors = 0
        # File state, owned by the writer thread once started.
        self._fd = -1
        self._path: Path | None = None
        self._index = -1
        self._size = 0  # bytes on disk in the current file
        self._file_records = 0  # records after capture_open in the current file, pending too
        self._seq = 0
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._pending_submitted = 0
        self._unsynced = False  # written but not yet fdatasync'ed, since _dirty_since
        self._dirty_since = 0.0
        # After a failed write: the lines not on disk, oldest first, and how many submitted
        # records they hold; why the last write failed, and since when.
        self._held = b""
        self._held_submitted = 0
        self._failing: str | None = None
        self._failing_since = 0.0
        self._lost = 0  # submitted records given up after failed writes (in `dropped` too)
        self._open_pending = False  # `_pending[0]` is the capture_open of a file just opened

    # -- the caller's side ------------------------------------------------------------------

    def start(self, *, inline: bool = False) -> None:
        """Create the folder and the first file, then start the writer thread.

        `inline`: no thread and no queue; `submit` serializes at once into a pending batch and
        the caller's `pump` writes it, syncs and writes `capture_stats` when due. For a caller
        that does nothing else, such as the capture worker process: two threads would only
        hand the GIL back and forth.
        """
        if self._started or self._closing:
            raise CaptureError("a capture writer starts once")
        make_capture_dir(self.out_dir)
        try:
            self._open_file(0)
        except OSError as e:
            raise CaptureError(f"cannot create a capture file in {self.out_dir}: {e}") from e
        self._write_pending()
        if not self._size:  # not even capture_open went in: leave nothing behind
            os.close(self._fd)
            self._fd = -1
            with contextlib.suppress(OSError):
                os.unlink(self._path or "")
            raise CaptureError(f"cannot write to {self._path}")
        self._started = True
        if inline:
            self._inline = True
            self._stats_due = time.monotonic() + self._stats_interval
            return
        self._thread = threading.Thread(target=self._run, name="seamwatch-writer", daemon=True)
        self._thread.start()

    def submit(self, record: dict[str, object]) -> None:
        """Queue a record (kind, ts_ns, mono_ns and its fields; no seq); never blocks or raises."""
        if not self._admit(1):
            return
        if self._inline:
            self._add(record)
        else:
            self._queue.put(record)

    def submit_encoded(self, members: list[bytes]) -> None:
        """Queue records already serialized, in order; never blocks or raises.

        Each is a JSON object as `to_json` writes it, without its opening `{`: the writer puts
        `{"seq":N,` there. The list counts as one item against the queue's bound.
        """
        if not self._admit(len(members)):
            return
        if self._inline:
            self._add_encoded(members)
        else:
            self._queue.put(_Encoded(members))

    def _admit(self, count: int) -> bool:
        """Count `count` records seen; False, counted as dropped, when they cannot be taken
        (closing, or the queue full); inline, make sure a file is open to take them."""
        self._seen += count
        if self._closing or (not self._inline and self._queue.qsize() >= self._queue_max):
            self._dropped += count
            return False
        if self._inline and self._fd < 0:
            self._reopen()
        return True

    def rotate(self) -> None:
        """Close the current file and open the next (SIGHUP, as log rotation tools send)."""
        if not self._started or self._closing:
            return
        if self._inline:
            self._rotate_now()
        else:
            self._queue.put(_ROTATE)

    @property
    def holding(self) -> bool:
        """Whether records are held in memory after a failed write (not yet on disk)."""
        return bool(self._held)

    @property
    def files(self) -> int:
        """Capture files this writer opened."""
        return self._index + 1

    def count_error(self) -> None:
        """Count a failure of the addon's capture path."""
        self._addon_errors += 1

    def count_redacted(self, n: int) -> None:
        """Count secrets the redactor replaced."""
        self._redacted += n

    @property
    def lost(self) -> int:
        """Records given up after failed writes (ENOSPC, EIO, ...), counted in `dropped` too."""
        return self._lost

    @property
    def counters(self) -> dict[str, int]:
        """seen, written, dropped, redacted, addon_errors, as `records.Counters`."""
        return {
            "seen": self._seen,
            "written": self._written,
            "dropped": self._dropped + self._lost,
            "redacted": self._redacted,
            "addon_errors": self._addon_errors + self._writer_errors,
        }

    def count_upstream(self, dropped: int, errors: int) -> None:
        """Add records lost and capture errors counted before this writer (another process)."""
        self._seen += dropped
        self._dropped += dropped
        self._addon_errors += errors

    def abandon(self) -> None:
        """Like close, but without `capture_close`: the capturing process died uncleanly."""
        self._unclean = True
        self.close()

    def close(self) -> None:
        """Drain the queue, write capture_stats and capture_close, sync and rename; idempotent.

        A writer that was never started writes nothing, and what it queued is lost.
        """
        if self._inline:
            if not self._closing:
                self._closing = True
                self._finish()
            return
        self._closing = True
        thread = self._thread
        if thread is None:
            return
        if thread.is_alive():
            self._queue.put(_CLOSE)
            thread.join(self._close_timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def pump(self) -> float:
        """Inline mode: write what is pending, and sync or write stats if due.

        Returns the seconds until the next of those is due: call again by then.
        """
        if not self._inline or self._closing:
            return self._flush_interval
        self._write_pending()
        now = time.monotonic()
        if now >= self._stats_due:
            self._add_own("capture_stats")
            self._stats_due = now + self._stats_interval
            self._age_out()
        if self._unsynced and now >= self._dirty_since + self._flush_interval:
            self._sync()
        due = self._stats_due
        if self._unsynced:
            due = min(due, self._dirty_since + self._flush_interval)
        if self._held:
            due = min(due, now + _RETRY_S)
        return max(0.0, due - now)

    # -- the writer's side ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:  # a bug here must not pass silently: the queue then fills, drops
            self._writer_errors += 1
            log.exception("seamwatch capture writer stopped; records are dropped from now on")
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def _loop(self) -> None:
        get, get_nowait, empty = self._queue.get, self._queue.get_nowait, queue.Empty
        now = time.monotonic()
        stats_due = now + self._stats_interval
        closing = False
        item: object = None  # a record carried over from a full batch
        while True:
            if item is None:
                if closing:
                    break
                due = stats_due
                if self._unsynced:
                    due = min(due, self._dirty_since + self._flush_interval)
                if self._held:
                    due = min(due, now + _RETRY_S)
                with contextlib.suppress(empty):
                    item = get(timeout=max(0.0, due - now))
            if self._fd < 0:
                self._reopen()
            batch = 0
            while item is not None and batch < _BATCH_MAX:
                if item is _CLOSE:
                    closing = True  # and drain what raced past the flag
                    batch += 1
                elif item is _ROTATE:
                    self._rotate_now()
                    batch += 1
                elif type(item) is _Encoded:
                    self._add_encoded(item)
                    batch += len(item)
                else:
                    self._add(item)
                    batch += 1
                try:
                    item = get_nowait()
                except empty:
                    item = None
            self._write_pending()
            if not closing and batch < _BATCH_MAX:
                # Let records pile up before the next drain: waking for every record would
                # hand the GIL back and forth with the proxy's event loop at each event.
                time.sleep(_DRAIN_PAUSE_S)
            now = time.monotonic()
            if now >= stats_due:
                self._add_own("capture_stats")
                stats_due = now + self._stats_interval
                self._age_out()
            if self._unsynced and now >= self._dirty_since + self._flush_interval:
                self._sync()
        self._finish()

    def _finish(self) -> None:
        self._write_pending()
        if self._held:
            # Still failing at close: give the held records up, so the few bytes of the last
            # counters may still fit and tell the reader what was lost.
            self._give_up("the capture was closed")
        self._add_own("capture_stats")
        if not self._unclean:
            self._add_own("capture_close")
        self._close_file()

    def _add(self, record: object) -> None:
        """Serialize a submitted record into the pending batch."""
        body = self._encode(record)
        if body is not None:
            self._append(body[1:])
            self._pending_submitted += 1

    def _add_encoded(self, members: list[bytes]) -> None:
        """Put records serialized by the caller into the pending batch."""
        seq = self._seq
        lines = list(
            map(SEQ_LINE.__mod__, zip(range(seq, seq + len(members)), members, strict=True))
        )
        size = sum(map(len, lines))
        if self._fd >= 0 and self._size + self._pending_size + size > self._rotate_bytes:
            for m in members:  # the file rotates somewhere in there
                self._append(m)
        else:
            self._seq += len(lines)
            self._pending += lines
            self._pending_size += size
            self._file_records += len(lines)
        self._pending_submitted += len(members)

    def _add_own(self, kind: str) -> None:
        """Write one of the writer's own records, with counters as of everything before it."""
        self._write_pending()
        record: dict[str, object] = {"kind": kind, **stamp()} | self.counters
        body = self._encode(record)
        if body is not None:
            self._append(body[1:])
        self._write_pending()

    def _append(self, members: bytes) -> None:
        line = with_seq(self._seq, members)
        if (
            self._fd >= 0
            and self._file_records
            and self._size + self._pending_size + len(line) > self._rotate_bytes
        ):
            self._rotate()
            line = with_seq(self._seq, members)
        self._seq += 1
        self._pending.append(line)
        self._pending_size += len(line)
        self._file_records += 1
