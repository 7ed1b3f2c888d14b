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
- A failed write (ENOSPC, EIO, EROFS, ...) loses nothing at once: the batch is cut back to its
  last whole line on disk, held in memory (up to `hold_bytes`) and written again every
  `_RETRY_S`, so a disk that fills and then frees space costs no record. It is said at once on
  the `analyzer.capture` logger (an error), and so is the recovery (a warning). What outgrows
  the hold, or is still held at close, is given up: counted in `dropped`, said with its cause;
  `lost` tells the caller (the proxy then exits 1). What is held is always the tail of the
  run's `seq`, so giving it up takes its numbers back: like a record dropped at the queue, it
  leaves no gap, and `dropped` alone says it (one loss, counted once by the reader).
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
  ensure_ascii=False)` and four times faster; a record it refuses goes through `json.dumps`,
  and text holding lone surrogates (which have no UTF-8 form) is repaired: surrogate pairs
  joined, lone ones replaced by U+FFFD, and the repair counted as an error. A caller that
  serializes records itself, as `to_json` would, hands them over a list at a time
  (`submit_encoded`): one queue item instead of one per record.
- Retention (`Retention`, `analyzer.capture.retention`): before each new file is opened, the
  oldest closed files of the folder go until it is within its bounds with room for the new
  file; the new file's capture_open lists them and, per run, the last `seq` deleted so far, so
  a reader can tell the cut from loss. Bounds by age are checked with the stats: a file that
  ages out rotates the current one, so its deletion is recorded at once. `rotate()` (SIGHUP)
  closes the current file and opens the next.
- Files are created 0600 with O_EXCL whatever the umask. A capture folder that the writer
  creates is 0700, as is every missing parent it creates on the way; one that already exists
  is left as its owner set it (it may be shared on purpose), the files in it being 0600 anyway.
"""

from __future__ import annotations

import contextlib
import json
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
from pydantic_core import PydanticSerializationError, to_json

from analyzer import SeamwatchError
from analyzer.capture.retention import Retention, expired, prune
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
_FALLBACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Encoded(list[bytes]):
    """A list of records serialized by the caller (`submit_encoded`), as one queue item."""


class CaptureError(SeamwatchError):
    """The capture could not be set up: its folder or first file cannot be made."""


class CaptureWriter:
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
            map(_SEQ_LINE.__mod__, zip(range(seq, seq + len(members)), members, strict=True))
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
        record: dict[str, object] = {"kind": kind, **_stamp()} | self.counters
        body = self._encode(record)
        if body is not None:
            self._append(body[1:])
        self._write_pending()

    def _encode(self, record: object) -> bytes | None:
        if not isinstance(record, dict) or not record:
            self._writer_errors += 1
            return None
        try:
            # NaN and infinities as null: the capture is strict JSON (RFC 8259 §6).
            return to_json(record, inf_nan_mode="null")
        except (PydanticSerializationError, ValueError, TypeError, RecursionError):
            pass
        try:
            text = _FALLBACK.encode(record)
        except (ValueError, TypeError, RecursionError):
            self._writer_errors += 1
            return None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates: UTF-16 round trip joins real pairs and replaces the rest.
            self._writer_errors += 1
            repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return repaired.encode("utf-8")

    def _append(self, members: bytes) -> None:
        line = _with_seq(self._seq, members)
        if (
            self._fd >= 0
            and self._file_records
            and self._size + self._pending_size + len(line) > self._rotate_bytes
        ):
            self._rotate()
            line = _with_seq(self._seq, members)
        self._seq += 1
        self._pending.append(line)
        self._pending_size += len(line)
        self._file_records += 1

    def _write_pending(self) -> None:
        """Write what is held after a failed write, then what is pending, in seq order."""
        if not self._pending and not self._held:
            return
        if self._fd < 0 and self._failing is not None:
            self._reopen()  # a file that could not be created then may be now
        pending = self._pending
        if self._open_pending:  # a new file's capture_open goes first, before what is held
            data = pending[0] + self._held + b"".join(pending[1:])
        else:
            data = self._held + b"".join(pending)
        held = self._held_submitted
        submitted = held + self._pending_submitted
        self._pending = []
        self._pending_size = 0
        self._pending_submitted = 0
        self._held, self._held_submitted = b"", 0
        self._open_pending = False
        try:
            if self._fd < 0:
                raise OSError("no capture file open")
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            self._writer_errors += 1
            # Cut a torn write back to the last whole line, so the next batch starts clean.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            self._hold(data, submitted, e)
            return
        self._size += len(data)
        self._written += submitted
        if self._failing is not None and held:  # (none held: all given up, said then)
            log.warning(
                "capture writing to %s again after %.1f s: %d held record(s) written",
                self._path,
                time.monotonic() - self._failing_since,
                held,
            )
        self._failing = None
        if not self._unsynced:
            self._unsynced = True
            self._dirty_since = time.monotonic()

    def _hold(self, data: bytes, submitted: int, error: OSError) -> None:
        """Keep lines a write failed to take, to try again; say so when the trouble starts."""
        self._held, self._held_submitted = data, submitted
        if self._failing is None:
            self._failing = _reason(error)
            self._failing_since = time.monotonic()
            log.error(
                "cannot write the capture file %s: %s; holding records in memory, retrying",
                self._path,
                self._failing,
            )
        if len(data) > self._hold_bytes:
            self._give_up(f"more than {self._hold_bytes} bytes held")

    def _give_up(self, why: str) -> None:
        """Drop the held lines: counted in `dropped` and `lost`, said with their cause."""
        count = self._held_submitted
        self._lost += count  # not `_dropped`: the caller's thread writes that one
        held = self._held
        self._seq = int(held[len(b'{"seq":') : held.index(b",")])  # the first line's
        self._file_records -= held.count(b"\n")
        self._held, self._held_submitted = b"", 0
        log.error(
            "capture lost %d record(s) that could not be written to %s (%s; %s)",
            count,
            self._path,
            self._failing,
            why,
        )

    def _sync(self) -> None:
        self._unsynced = False
        try:
            os.fdatasync(self._fd)
        except OSError:
            self._writer_errors += 1

    def _open_file(self, index: int) -> None:
        """Create file `index` and queue its capture_open as the first pending line."""
        path = self.out_dir / f"capture-{self._run_id}-{index:04d}.jsonl.partial"
        if path.with_suffix("").exists():
            raise FileExistsError(f"{path.with_suffix('')} exists")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)  # the umask may have taken bits
        self._fd, self._path, self._index = fd, path, index
        self._size = self._file_records = 0
        record = (
            {"kind": "capture_open", **_stamp(), "file_index": index}
            | self._open_fields
            | self._retention_fields()
        )
        body = self._encode(record)
        if body is not None:
            line = _with_seq(self._seq, body[1:])
            self._seq += 1
            self._pending.insert(0, line)
            self._pending_size += len(line)
            self._open_pending = True
        _sync_dir(self.out_dir)

    def _close_file(self) -> None:
        """Write, sync, close and rename the current file to its final `.jsonl` name."""
        self._write_pending()
        if self._fd < 0 or self._path is None:
            return
        self._sync()
        try:
            os.close(self._fd)
            os.rename(self._path, self._path.with_suffix(""))
            _sync_dir(self.out_dir)
        except OSError:
            self._writer_errors += 1
        self._fd = -1

    def _rotate(self) -> None:
        if self._held:
            return  # the disk refuses this file's lines: a new file would put them out of order
        self._close_file()
        self._reopen()

    def _rotate_now(self) -> None:
        """Rotate between records: what is pending goes to the current file first."""
        self._write_pending()
        self._rotate()
        self._write_pending()

    def _age_out(self) -> None:
        """Rotate when a closed file is past `max_age_s`: the new file's capture_open records
        its deletion now, not whenever the current file fills."""
        if self._retention is not None and self._retention.max_age_s is not None:
            try:
                due = expired(self.out_dir, self._retention.max_age_s)
            except OSError:
                due = False
            if due and not self._age_stuck:
                self._rotate_now()
                # A file that cannot be deleted must not rotate a new file every interval.
                with contextlib.suppress(OSError):
                    self._age_stuck = expired(self.out_dir, self._retention.max_age_s)
            elif not due:
                self._age_stuck = False

    def _retention_fields(self) -> dict[str, object]:
        """Delete what retention lets go before a new file; capture_open's `retention`."""
        if self._retention is None:
            return {}
        try:
            deleted = prune(self.out_dir, self._retention, room=self._rotate_bytes)
        except OSError:
            self._writer_errors += 1
            deleted = []
        for gone in deleted:
            if gone.run_id is not None and gone.last_seq is not None:
                self._cut[gone.run_id] = max(self._cut.get(gone.run_id, -1), gone.last_seq)
        self.files_deleted += len(deleted)
        if deleted:
            log.info("retention deleted %d capture file(s) from %s", len(deleted), self.out_dir)
        return {
            "retention": self._retention.policy()
            | {"deleted": [gone.record() for gone in deleted], "cut": dict(self._cut)}
        }

    def _reopen(self) -> None:
        try:
            self._open_file(self._index + 1)
        except OSError:
            self._writer_errors += 1
            self._fd = -1
            self._index += 1  # the next try takes a fresh name


def make_capture_dir(out_dir: Path) -> None:
    """Create the capture folder and its missing parents, each 0700 whatever the umask.

    A folder that already exists is left as its owner set it. CaptureError with a one-line
    reason when a folder cannot be made or a path on the way is not a folder.
    """
    missing: list[Path] = []
    at = out_dir
    try:
        while not at.is_dir():
            if at.exists() or at.is_symlink():
                raise CaptureError(f"not a directory: {at}")
            missing.append(at)
            if at.parent == at:
                break
            at = at.parent
        for at in reversed(missing):
            try:
                at.mkdir(mode=0o700)
            except FileExistsError:
                if not at.is_dir():
                    raise CaptureError(f"not a directory: {at}") from None
                continue  # made meanwhile by someone else: theirs to set
            os.chmod(at, 0o700)  # mkdir's mode passes through the umask
    except OSError as e:
        raise CaptureError(f"cannot create the folder {at}: {_reason(e)}") from e


def prepare_capture_dir(out_dir: Path) -> None:
    """Make the capture folder as the writer will and check that a file can be created in it.

    For a caller that wants to fail before it starts anything (`seamwatch proxy`): the same
    CaptureError, with a one-line reason, that the writer would raise later.
    """
    make_capture_dir(out_dir)
    probe = out_dir / f".seamwatch-probe-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError as e:
        raise CaptureError(f"cannot create a file in {out_dir}: {_reason(e)}") from e
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _reason(e: OSError) -> str:
    """An OSError's reason without the path it repeats: 'Permission denied'."""
    return e.strerror or str(e)


def _stamp() -> dict[str, object]:
    return {"ts_ns": time.time_ns(), "mono_ns": time.monotonic_ns()}


# seq first, for whoever reads the file with their eyes: {"seq":N,"kind":...}; the members are
# those of a non-empty object and its closing brace.
_SEQ_LINE = b'{"seq":%d,%b\n'


def _with_seq(seq: int, members: bytes) -> bytes:
    return _SEQ_LINE % (seq, members)


def _sync_dir(path: Path) -> None:
    """fsync a folder, so that a file created or renamed in it survives power loss."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
