"""The capture files a tail reads, tracked from poll to poll: where each is, how far it was read,
and their read order (the order `lines.plan` gives), matched again by inode after renames."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pydantic_core

from analyzer.ingest import lines
from analyzer.ingest.lines import BOM, CaptureFile, head, parse_line

__all__ = ["Layout", "Tracked", "Unready", "layout"]

# A `.partial` file whose first line is not complete yet: size, mtime, how a full read counts it.
Unready = tuple[int, int, Counter[str]]


@dataclass
class Tracked:
    """One capture file the tail reads: where it is and how far it was read."""

    plan: CaptureFile  # its entry in the read order (path follows renames)
    inode: tuple[int, int]  # (st_dev, st_ino): a rename keeps it
    size: int = 0  # at the last stat
    mtime_ns: int = 0
    offset: int = 0  # bytes taken: complete lines, plus a line taken before its line end came
    read_size: int = 0  # the size up to which the file was read (a pending tail included)
    open_line: bool = False  # the bytes taken end with a record whose line end is still due
    sealed: bool = False  # a later file was read: an unterminated tail was taken as torn
    pending: Counter[str] = field(default_factory=Counter)  # how a full read counts the tail


# The files in read order, the unready ones, the duplicates left out, whether one was renamed.
Layout = tuple[list[Tracked], dict[str, Unready], dict[tuple[int, int], int], bool]


def layout(
    listed: Sequence[tuple[Path, os.stat_result]],
    files: list[Tracked],
    was_ignored: dict[tuple[int, int], int],
    was_unready: dict[str, Unready],
    cuts: dict[str, int],
    totals: Counter[str],
) -> Layout | None:
    """The files in read order (known ones matched by inode), or None when reading must
    start over because the new order contradicts what was read.

    `files`, `was_ignored` and `was_unready` are the tail's layout at its last poll; the plan
    damage of the new files is added to `totals`."""
    known = {f.inode: f for f in files}
    seen: set[tuple[int, int]] = set()
    tracked: list[Tracked] = []
    fresh: list[tuple[Path, os.stat_result]] = []
    unready: dict[str, Unready] = {}
    ignored: dict[tuple[int, int], int] = {}
    renamed = False
    for path, stat in listed:
        inode = (stat.st_dev, stat.st_ino)
        seen.add(inode)
        if inode in was_ignored:
            if stat.st_size != was_ignored[inode]:
                return None  # which copy a full read keeps may change: plan both again
            ignored[inode] = stat.st_size
            continue
        entry = known.get(inode)
        if entry is None:
            fresh.append((path, stat))
            continue
        if stat.st_size < entry.offset:
            return None  # truncated or rewritten
        if entry.plan.path != str(path):
            entry.plan = replace(entry.plan, path=str(path))
            renamed = True
        entry.size, entry.mtime_ns = stat.st_size, stat.st_mtime_ns
        tracked.append(entry)
    if set(known) - seen:
        return None  # a file read so far is gone
    ready = []
    for path, stat in fresh:
        previous = was_unready.get(str(path))
        if previous is not None and previous[:2] == (stat.st_size, stat.st_mtime_ns):
            unready[str(path)] = previous  # unchanged: not opened again
        elif _ready(path, stat.st_size):
            ready.append((path, stat))
        else:
            unready[str(path)] = _unready_counts(path, stat)
    if ready:
        counts: Counter[str] = Counter()
        planned = lines.plan([path for path, _ in ready], counts, cuts)
        stats = {str(path): stat for path, stat in ready}
        keys = {(f.plan.run, f.plan.file_index) for f in tracked}
        clash = any((p.run, p.file_index) in keys for p in planned)
        if files and (counts["duplicate_file"] or clash):
            # A rotation seen twice (a copy, a `.partial` beside its renamed file): let a
            # fresh start plan every file at once, as a full read does.
            return None
        totals.update(counts)
        kept = {p.path for p in planned}
        for path, stat in ready:
            if str(path) not in kept:  # the duplicate `plan` left out
                ignored[(stat.st_dev, stat.st_ino)] = stat.st_size
        for plan in planned:
            stat = stats[plan.path]
            tracked.append(
                Tracked(plan, (stat.st_dev, stat.st_ino), stat.st_size, stat.st_mtime_ns)
            )
    order = _order(tracked)
    if [f.inode for f in order if f.inode in known] != [f.inode for f in files if f.inode in seen]:
        return None
    # Files read so far must come before every new one, except new ones with no records.
    read = [i for i, f in enumerate(order) if f.offset > 0]
    if read and any(f.inode not in known for f in order[: read[-1]]):
        return None
    return order, unready, ignored, renamed


def _unready_counts(path: Path, stat: os.stat_result) -> Unready:
    """How a full read counts a `.partial` file whose first line is not complete yet."""
    counts: Counter[str] = Counter()
    lines.plan([path], counts)
    data = path.read_bytes()
    if data:
        if data.startswith(BOM):
            counts["bom"] += 1
            data = data[3:]
        parse_line(data, True, counts, pydantic_core.from_json)
    counts["missing_close"] += 1  # a run of its own that never closed
    return stat.st_size, stat.st_mtime_ns, counts


def _ready(path: Path, size: int) -> bool:
    """Whether a file's first line is there: until then a `.partial` file has no run."""
    if not path.name.endswith(".partial"):
        return True
    if size == 0:
        return False
    with path.open("rb") as fh:
        first = fh.readline(1 << 20)
    if first.endswith(b"\n") or len(first) >= 1 << 20:
        return True
    # A first record complete but for its line end: a full read takes it, so does the tail.
    return head(path)[0] is not None


def _order(files: list[Tracked]) -> list[Tracked]:
    """Read order: by run (first capture_open time), then rotation index (as `lines.plan`)."""
    run_start: dict[str, int] = {}
    for f in files:
        run_start[f.plan.run] = min(run_start.get(f.plan.run, f.plan.first_ts), f.plan.first_ts)
    return sorted(
        files,
        key=lambda f: (run_start[f.plan.run], f.plan.run, f.plan.file_index, f.plan.path),
    )
