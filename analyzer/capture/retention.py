"""Retention of a long-running capture: the oldest closed files go first (DESIGN.md §4).

Like tcpdump's `-C/-W` ring, but by bytes (`max_bytes`) and age (`max_age_s`) of the whole
capture folder: capture files of every run in it count, so a proxy restarted on the same folder
keeps it within bounds too. Only closed files (`capture-*.jsonl`) are deleted, never a
`.jsonl.partial`: that is a file some writer holds open (this one's, or another proxy's), or
the torn file of an unclean stop, which the reader still wants.

Each deletion names its run and the `seq` range it held, so the capture_open of the writer's
next file can say what was cut; the reader then reports the cut as a note instead of a loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Deleted", "Retention", "expired", "prune"]

# How far back from a file's end its last line is looked for (a line can be a large body).
_TAIL_STEP = 1 << 16
_SEQ_HEAD = re.compile(rb'\{"seq":(\d{1,19})[,}]')


@dataclass(frozen=True)
class Retention:
    """Bounds of the capture folder; None: unbounded."""

    max_bytes: int | None = None
    max_age_s: float | None = None

    def policy(self) -> dict[str, object]:
        """The bounds as recorded in capture_open."""
        return {"max_bytes": self.max_bytes, "max_age_s": self.max_age_s}


@dataclass(frozen=True)
class Deleted:
    """A capture file retention deleted, and which records of which run it held."""

    file: str
    run_id: str | None
    file_index: int | None
    first_seq: int | None
    last_seq: int | None
    bytes: int
    reason: str  # "max_bytes" or "max_age"

    def record(self) -> dict[str, object]:
        """As listed in capture_open's `retention.deleted`."""
        return {
            "file": self.file,
            "run_id": self.run_id,
            "file_index": self.file_index,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "bytes": self.bytes,
            "reason": self.reason,
        }


def _first_record(path: Path) -> dict[str, Any] | None:
    with path.open("rb") as fh:
        line = fh.readline(1 << 20)
    try:
        first = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return first if isinstance(first, dict) else None


def _last_seq(path: Path, size: int) -> int | None:
    """The `seq` of the file's last line: the writer puts it first, `{"seq":N,`. Read back
    block by block to the line's start, then only its head: a line can be a large body."""
    with path.open("rb") as fh:
        fh.seek(max(0, size - 1))
        pos = size - 1 if fh.read(1) == b"\n" else size
        line_start = 0
        while pos > 0:
            start = max(0, pos - _TAIL_STEP)
            fh.seek(start)
            newline = fh.read(pos - start).rfind(b"\n")
            if newline >= 0:
                line_start = start + newline + 1
                break
            pos = start
        fh.seek(line_start)
        found = _SEQ_HEAD.match(fh.read(32))
    return int(found[1]) if found else None


def _describe(path: Path, size: int, reason: str) -> Deleted:
    run_id = index = first_seq = last_seq = None
    with contextlib.suppress(OSError, ValueError):
        first = _first_record(path)
        if first is not None and first.get("kind") == "capture_open":
            run_id = first.get("run_id") if isinstance(first.get("run_id"), str) else None
            index = first.get("file_index") if isinstance(first.get("file_index"), int) else None
            first_seq = first.get("seq") if isinstance(first.get("seq"), int) else None
        last_seq = _last_seq(path, size)
    return Deleted(path.name, run_id, index, first_seq, last_seq, size, reason)


def prune(out_dir: Path, retention: Retention, *, room: int = 0) -> list[Deleted]:
    """Delete the oldest closed capture files until the folder is within `retention`, with
    `room` bytes left for the file about to be written; what was deleted, oldest first."""
    if retention.max_bytes is None and retention.max_age_s is None:
        return []
    closed: list[tuple[int, str, Path, int]] = []
    total = 0
    for path in out_dir.glob("capture-*.jsonl*"):
        try:
            st = path.stat()
        except OSError:
            continue  # deleted meanwhile
        total += st.st_size
        if path.name.endswith(".jsonl"):
            closed.append((st.st_mtime_ns, path.name, path, st.st_size))
    closed.sort()
    now_ns = time.time_ns()
    deleted = []
    for mtime_ns, _name, path, size in closed:
        if retention.max_age_s is not None and now_ns - mtime_ns > retention.max_age_s * 1e9:
            reason = "max_age"
        elif retention.max_bytes is not None and total + room > retention.max_bytes:
            reason = "max_bytes"
        else:
            break  # oldest first: what is left is newer, and the folder is within bounds
        gone = _describe(path, size, reason)
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError:
            break  # a folder that refuses deletes: the writer says nothing more can go
        total -= size
        deleted.append(gone)
    return deleted


def expired(out_dir: Path, max_age_s: float) -> bool:
    """Whether a closed capture file in the folder is older than `max_age_s`."""
    limit = time.time_ns() - max_age_s * 1e9
    for path in out_dir.glob("capture-*.jsonl"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime_ns < limit:
                return True
    return False
