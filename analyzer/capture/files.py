"""The capture files: made private, written, held after a failed write, rotated, retained.

`CaptureFiles` is `CaptureWriter`'s base (`analyzer.capture.writer`): the writer's thread (or
its inline caller) owns this state; the writer's `__init__` sets it.

A failed write (ENOSPC, EIO, EROFS, ...) loses nothing at once: the batch is cut back to its
last whole line on disk, held in memory (up to `hold_bytes`) and written again every
`_RETRY_S`, so a disk that fills and then frees space costs no record. It is said at once on
the `analyzer.capture` logger (an error), and so is the recovery (a warning). What outgrows
the hold, or is still held at close, is given up: counted in `dropped`, said with its cause;
`lost` tells the caller (the proxy then exits 1). What is held is always the tail of the
run's `seq`, so giving it up takes its numbers back: like a record dropped at the queue, it
leaves no gap, and `dropped` alone says it (one loss, counted once by the reader).

Retention (`Retention`, `analyzer.capture.retention`): before each new file is opened, the
oldest closed files of the folder go until it is within its bounds with room for the new
file; the new file's capture_open lists them and, per run, the last `seq` deleted so far, so
a reader can tell the cut from loss. Bounds by age are checked with the stats: a file that
ages out rotates the current one, so its deletion is recorded at once. `rotate()` (SIGHUP)
closes the current file and opens the next.

Files are created 0600 with O_EXCL whatever the umask. A capture folder that the writer
creates is 0700, as is every missing parent it creates on the way; one that already exists
is left as its owner set it (it may be shared on purpose), the files in it being 0600 anyway.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path

from pydantic_core import PydanticSerializationError, to_json

from analyzer import SeamwatchError
from analyzer.capture.retention import Retention, expired, prune

__all__ = [
    "SEQ_LINE",
    "CaptureError",
    "CaptureFiles",
    "make_capture_dir",
    "prepare_capture_dir",
    "reason",
    "stamp",
    "sync_dir",
    "with_seq",
]

# The writer's logger: what a failed write says comes from the writer, as it always has.
log = logging.getLogger("analyzer.capture.writer")

_FALLBACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class CaptureError(SeamwatchError):
    """The capture could not be set up: its folder or first file cannot be made."""


class CaptureFiles:
    """The files of a `CaptureWriter`: serialize, write, hold, sync, open, close, rotate."""

    out_dir: Path
    _open_fields: dict[str, object]
    _run_id: str
    _rotate_bytes: int
    _hold_bytes: int
    _retention: Retention | None
    _cut: dict[str, int]
    files_deleted: int
    _age_stuck: bool
    _written: int
    _writer_errors: int
    _fd: int
    _path: Path | None
    _index: int
    _size: int
    _file_records: int
    _seq: int
    _pending: list[bytes]
    _pending_size: int
    _pending_submitted: int
    _unsynced: bool
    _dirty_since: float
    _held: bytes
    _held_submitted: int
    _failing: str | None
    _failing_since: float
    _lost: int
    _open_pending: bool

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
            self._failing = reason(error)
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
            {"kind": "capture_open", **stamp(), "file_index": index}
            | self._open_fields
            | self._retention_fields()
        )
        body = self._encode(record)
        if body is not None:
            line = with_seq(self._seq, body[1:])
            self._seq += 1
            self._pending.insert(0, line)
            self._pending_size += len(line)
            self._open_pending = True
        sync_dir(self.out_dir)

    def _close_file(self) -> None:
        """Write, sync, close and rename the current file to its final `.jsonl` name."""
        self._write_pending()
        if self._fd < 0 or self._path is None:
            return
        self._sync()
        try:
            os.close(self._fd)
            os.rename(self._path, self._path.with_suffix(""))
            sync_dir(self.out_dir)
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
        raise CaptureError(f"cannot create the folder {at}: {reason(e)}") from e


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
        raise CaptureError(f"cannot create a file in {out_dir}: {reason(e)}") from e
    with contextlib.suppress(OSError):
        os.unlink(probe)


def reason(e: OSError) -> str:
    """An OSError's reason without the path it repeats: 'Permission denied'."""
    return e.strerror or str(e)


def stamp() -> dict[str, object]:
    return {"ts_ns": time.time_ns(), "mono_ns": time.monotonic_ns()}


# seq first, for whoever reads the file with their eyes: {"seq":N,"kind":...}; the members are
# those of a non-empty object and its closing brace.
SEQ_LINE = b'{"seq":%d,%b\n'


def with_seq(seq: int, members: bytes) -> bytes:
    return SEQ_LINE % (seq, members)


def sync_dir(path: Path) -> None:
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
