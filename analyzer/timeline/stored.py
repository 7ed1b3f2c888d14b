"""The frames `build_timeline` collects, kept beside the normalized tables they came from.

`build_timeline` collects the flow-level frames (the flows' placement, the request and answer
rows, tool calls, streams, incarnations, resumptions, sessions, exchanges) once per analysis:
about a quarter of an analysis from the Parquet cache. They depend on nothing but the inputs'
normalized tables, in their order, and on the code that builds them, so the first analysis of a
set of inputs stores them in the first input's cache entry and a later one reads them back:

    <cache entry of the first input>/timeline-<key 16>/
        manifest.json      the key, each frame's rows and SHA-256 (written last: complete)
        verified.json      the frames hashed before (`analyzer.cache.digests`)
        <frame>.parquet    one per name in `STORED`

The key hashes the inputs' entry folder names (each names its input and its cache key, so a
grown capture or another option is another key), the source of the timeline stages, of
`analyzer.schema` and of `analyzer.ingest` (which reads several inputs as one), and the Polars
version: changed code is a new key, never a stale frame. Inputs whose tables are not all in the
cache (one that could not be written) store nothing.

A set is written to a `.tmp-` folder and renamed into place; an entry keeps its `KEEP` most
recently used sets (an input is often analyzed alone and merged with others). Reading a set
checks every file against its SHA-256 and takes the frames out of it (into memory, or into the
caller's spill folder for a large one): another analysis may prune the set meanwhile. A set that
is damaged, or that is not a plain folder, is removed and stored again by the next analysis; a
storing that fails (no room) stores nothing and changes nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Final

import polars as pl

import analyzer.ingest
import analyzer.schema
from analyzer.cache import CACHE_DIR, digests, file_digest, sweep

__all__ = [
    "COMPRESSION",
    "KEEP",
    "STORED",
    "StoredFrames",
    "Writer",
    "link_or_copy",
    "read",
    "target",
]

STORED: Final = (
    "event_dates",
    "placement",
    "rpc_messages",
    "tool_calls",
    "streams",
    "incarnations",
    "resumptions",
    "sessions",
    "recurring_events",
    "resumed_events",
    "replay_messages",
    "id_counters",
    "resumes_at_cursor",
    "after_cursor",
    "resumed_progress",
    "exchanges",
)
"""The frames stored, by the names `build_timeline` keeps them under."""
IN_MEMORY: Final = frozenset({"placement", "event_dates"})
"""Frames read into memory whatever their size (every record-level scan joins to them)."""
KEEP: Final = 3
COMPRESSION: Final = "uncompressed"
"""How stored and spilled frames are written: every detector scans them again, and LZ4 saved
little room on them (mostly ids and hashes; 453 MB against 542 at 10M events) for a twentieth
of an analysis from the cache spent decoding it (`bench/timeline_bench.py --phase analyze`)."""
_MANIFEST: Final = "manifest.json"
_PREFIX: Final = "timeline-"

StoredFrames = dict[str, pl.LazyFrame]


@cache
def _code_key() -> str:
    """A hash of the code that builds the frames: the timeline package, the schemas and what
    reads the normalized tables of several inputs as one (`analyzer.ingest.Ingested.scan`)."""
    digest = hashlib.sha256(pl.__version__.encode())
    package = sorted(Path(__file__).parent.glob("*.py"))
    for source in [*package, Path(analyzer.schema.__file__), Path(analyzer.ingest.__file__)]:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def target(directories: Sequence[Path | None]) -> Path | None:
    """Where the frames of the inputs read into these entry folders are kept: None unless every
    one is a cache entry (not a private temporary folder, as when the cache is off or cannot be
    written)."""
    present = [d for d in directories if d is not None]
    if not present or any(d.parent.name != CACHE_DIR for d in present):
        return None
    names = [d.name if d is not None else "-" for d in directories]
    text = json.dumps([_code_key(), names])
    return present[0] / f"{_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def read(folder: Path, *, spill_dir: Path | None, scan_from: int) -> StoredFrames | None:
    """The stored frames, or None when `folder` holds no sound set (a damaged one is removed).

    A frame of `scan_from` rows or more (but those `IN_MEMORY`) is copied into `spill_dir` and
    scanned from there, as `build_timeline` keeps large frames; without a `spill_dir` every
    frame is read into memory.
    """
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        _discard(folder)  # not what `Writer` makes
        return None
    if not folder.is_dir():
        return None  # not stored yet
    frames: StoredFrames = {}
    try:
        manifest = json.loads((folder / _MANIFEST).read_text("utf-8"))
        if manifest["key"] != folder.name:
            raise ValueError("another key")
        found = digests(folder)
        for name in STORED:
            rows, digest = int(manifest["rows"][name]), str(manifest["sha256"][name])
            path = folder / f"{name}.parquet"
            if found.get(path.name) != digest:
                raise ValueError(f"{name}: damaged")
            own = spill_dir / f"stored-{name}.parquet" if spill_dir is not None else None
            if (
                own is not None
                and rows >= scan_from
                and name not in IN_MEMORY
                and link_or_copy(path, own)
            ):
                frames[name] = pl.scan_parquet(own)
            else:  # small, or no room for a copy: in memory
                frames[name] = pl.read_parquet(path).lazy()
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pl.exceptions.PolarsError):
        # Sets are renamed into place whole: this one is damaged. Stored again next time.
        _discard(folder)
        return None
    with contextlib.suppress(OSError):
        os.utime(folder)  # recently used: kept by the pruning
    return frames


def link_or_copy(source: Path, target: Path) -> bool:
    """`target` made the same file as `source` (a hard link, else a copy); False if it could not
    be (no room). The copy is the caller's: whatever becomes of `source` afterwards."""
    try:
        os.link(source, target)
    except OSError:
        try:
            shutil.copyfile(source, target)
        except OSError:
            return False
    return True


class Writer:
    """A set of frames being stored: `put` each as it is collected, then `commit` (or
    `abandon`). A frame that cannot be written makes the set fail, nothing else."""

    def __init__(self, folder: Path, staging: Path) -> None:
        self.folder = folder
        self.staging = staging
        self.rows: dict[str, int] = {}
        self.digests: dict[str, str] = {}
        self.failed = False

    @staticmethod
    def start(folder: Path) -> Writer | None:
        """A writer for `folder`, or None when its entry cannot be written to."""
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".tmp-{_PREFIX}", dir=folder.parent))
        except OSError:
            return None
        return Writer(folder, staging)

    def put(self, name: str, frame: pl.DataFrame) -> Path | None:
        """Write one frame; its file in the staging folder, until `commit` (None once the set
        has failed)."""
        if self.failed:
            return None
        path = self.staging / f"{name}.parquet"
        try:
            frame.write_parquet(path, compression=COMPRESSION, statistics=False)
        except (OSError, pl.exceptions.PolarsError):
            self.abandon()
            return None
        return self._record(name, path, frame.height)

    def put_file(self, name: str, source: Path, rows: int) -> None:
        """Store a frame already written (`rows` rows) to a Parquet file: linked, else copied."""
        if self.failed:
            return
        path = self.staging / f"{name}.parquet"
        if not link_or_copy(source, path):
            self.abandon()
            return
        self._record(name, path, rows)

    def _record(self, name: str, path: Path, rows: int) -> Path | None:
        try:
            os.chmod(path, 0o600)
            digest = file_digest(path)
        except OSError:
            self.abandon()
            return None
        self.rows[name] = rows
        self.digests[name] = digest
        return path

    def commit(self) -> bool:
        """Publish the set; False (and nothing left behind) when it failed or another analysis
        published it first."""
        if self.failed or set(self.rows) != set(STORED):
            self.abandon()
            return False
        try:
            manifest = {"key": self.folder.name, "rows": self.rows, "sha256": self.digests}
            (self.staging / _MANIFEST).write_text(json.dumps(manifest, sort_keys=True), "utf-8")
            os.chmod(self.staging / _MANIFEST, 0o600)
            os.rename(self.staging, self.folder)
        except OSError:
            self.abandon()
            return False
        _prune(self.folder.parent, self.folder)
        return True

    def abandon(self) -> None:
        self.failed = True
        shutil.rmtree(self.staging, ignore_errors=True)


def _discard(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _prune(entry: Path, new: Path) -> None:
    """Keep `new` and the most recently used other sets of an entry (`KEEP` in all); remove
    staging folders left by analyses that died long ago."""
    sweep(entry)
    sets = []
    for child in entry.iterdir():
        if child.name.startswith(_PREFIX) and child != new:
            with contextlib.suppress(OSError):
                sets.append((child.stat().st_mtime_ns, child))
    for _, old in sorted(sets, reverse=True)[KEEP - 1 :]:
        _discard(old)
