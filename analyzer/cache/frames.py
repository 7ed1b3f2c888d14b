"""The frames `build_timeline` collects, kept beside the normalized tables they came from.

`build_timeline` collects the flow-level frames (`analyzer.timeline.frames`, those `stored`)
once per analysis: about a quarter of an analysis from the Parquet cache. They depend on nothing
but the inputs' normalized tables, in their order, and on the code that builds them, so the
first analysis of a set of inputs stores them in the first input's cache entry and a later one
reads them back:

    <cache entry of the first input>/timeline-<key 16>/
        manifest.json      the key, each frame's rows and SHA-256 (written last: complete)
        verified.json      the frames hashed before (`analyzer.cache.entries.digests`)
        <frame>.parquet    one per stored frame

The key hashes the inputs' entry folder names (each names its input and its cache key, so a
grown capture or another option is another key), `SET_FORMAT`, the source of the timeline
package, of `analyzer.schema`, of what reads several inputs as one (`analyzer.ingest`,
`analyzer.analysis`), and the Polars version: changed code is a new key, never a stale frame.
Inputs whose tables are not all in the cache (one that could not be written) store nothing.

A set is staged and renamed into place (`analyzer.cache.commit`); an entry keeps its `KEEP` most
recently used sets (an input is often analyzed alone and merged with others). Reading a set
checks every file against its SHA-256 and hands each frame to the caller, who takes it out of
the set at once (into memory, or into its spill folder): another analysis may prune the set
meanwhile. A set that is damaged, or that is not a plain folder, is removed and stored again by
the next analysis; a storing that fails (no room) stores nothing and changes nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Final

import polars as pl

from analyzer.cache.commit import Staging, discard, sweep
from analyzer.cache.entries import CACHE_DIR, digests, file_digest

__all__ = ["KEEP", "SET_FORMAT", "FrameWriter", "frame_set", "read_frames"]

KEEP: Final = 3
SET_FORMAT: Final = 2
"""The set's own layout, in the key (2: one package commits entries and sets; every frame of
`analyzer.timeline.frames` declared, the progress frame among them)."""
COMPRESSION: Final = "uncompressed"  # as `analyzer.timeline.kept` writes its spilled frames
_MANIFEST: Final = "manifest.json"
_PREFIX: Final = "timeline-"
# The code that builds the stored frames, under `analyzer/`: its source is in the key.
_BUILDING_CODE: Final = ("inputs.py", "analysis.py", "ingest/__init__.py")


@cache
def _code_key() -> str:
    """A hash of the code that builds the frames (read once a process)."""
    root = Path(__file__).parents[1]
    digest = hashlib.sha256(f"{pl.__version__} {SET_FORMAT}".encode())
    packages = [*sorted((root / "timeline").glob("*.py")), *sorted((root / "schema").glob("*.py"))]
    sources = [*packages, *(root / n for n in _BUILDING_CODE)]
    for source in sources:
        digest.update(source.relative_to(root).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def frame_set(directories: Sequence[Path | None]) -> Path | None:
    """Where the frames of the inputs read into these entry folders are kept: None unless every
    one is a cache entry (not a private temporary folder, as when the cache is off or cannot be
    written)."""
    present = [d for d in directories if d is not None]
    if not present or any(d.parent.name != CACHE_DIR for d in present):
        return None
    names = [d.name if d is not None else "-" for d in directories]
    text = json.dumps([_code_key(), names])
    return present[0] / f"{_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def read_frames(
    folder: Path, names: Sequence[str], take: Callable[[str, Path, int], object]
) -> bool:
    """Hand each stored frame of `names` to `take(name, file, rows)`, which takes it out of the
    set; False when `folder` holds no sound set (a damaged one is removed)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        discard(folder)  # not what `FrameWriter` makes
        return False
    if not folder.is_dir():
        return False  # not stored yet
    try:
        manifest = json.loads((folder / _MANIFEST).read_text("utf-8"))
        if manifest["key"] != folder.name:
            raise ValueError("another key")
        found = digests(folder)
        for name in names:
            rows, digest = int(manifest["rows"][name]), str(manifest["sha256"][name])
            path = folder / f"{name}.parquet"
            if found.get(path.name) != digest:
                raise ValueError(f"{name}: damaged")
            take(name, path, rows)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pl.exceptions.PolarsError):
        # Sets are renamed into place whole: this one is damaged. Stored again next time.
        discard(folder)
        return False
    with contextlib.suppress(OSError):
        os.utime(folder)  # recently used: kept by the pruning
    return True


class FrameWriter:
    """A set of frames being stored: `put` each as it is collected, then `commit` (or
    `abandon`). A frame that cannot be written makes the set fail, nothing else."""

    def __init__(self, folder: Path, staging: Staging, names: Sequence[str]) -> None:
        self.folder = folder
        self.staging = staging
        self.names = frozenset(names)
        self.rows: dict[str, int] = {}
        self.digests: dict[str, str] = {}
        self.failed = False

    @staticmethod
    def start(folder: Path, names: Sequence[str]) -> FrameWriter | None:
        """A writer of the frames `names` for `folder`, or None when its entry cannot be
        written to."""
        try:
            staging = Staging.start(folder.parent, _PREFIX)
        except OSError:
            return None
        return FrameWriter(folder, staging, names)

    def put(self, name: str, frame: pl.DataFrame) -> Path | None:
        """Write one frame; its file in the staging folder, until `commit` (None once the set
        has failed)."""
        if self.failed:
            return None
        path = self.staging.path / f"{name}.parquet"
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
        path = self.staging.path / f"{name}.parquet"
        try:
            try:
                os.link(source, path)
            except OSError:
                shutil.copyfile(source, path)
        except OSError:
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
        if self.failed or set(self.rows) != self.names:
            self.abandon()
            return False
        try:
            manifest = {"key": self.folder.name, "rows": self.rows, "sha256": self.digests}
            self.staging.seal(_MANIFEST, manifest)
            self.staging.publish(self.folder)
        except OSError:
            self.abandon()
            return False
        _prune(self.folder.parent, self.folder)
        return True

    def abandon(self) -> None:
        self.failed = True
        self.staging.abandon()


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
        discard(old)
