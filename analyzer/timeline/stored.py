"""The frames `build_timeline` collects, kept beside the normalized tables they came from.

`build_timeline` collects the flow-level frames (the flows' placement, the request and answer
rows, tool calls, streams, incarnations, resumptions, sessions, exchanges) once per analysis:
about a quarter of an analysis from the Parquet cache. They depend on nothing but the inputs'
normalized tables, in their order, and on the code that builds them, so the first analysis of a
set of inputs stores them in the first input's cache entry and a later one reads them back:

    <cache entry of the first input>/timeline-<key 16>/
        manifest.json      the key and each frame's row count (written last: complete)
        <frame>.parquet    one per name in `STORED`

The key hashes the inputs' entry folder names (each names its input and its cache key, so a
grown capture or another option is another key), the source of the timeline stages, of
`analyzer.schema` and of `analyzer.ingest` (which reads several inputs as one), and the Polars
version: changed code is a new key, never a stale frame. A
set is written to a `.tmp-` folder and renamed into place; an entry keeps its `KEEP` most recent
sets (an input is often analyzed alone and merged with others). Entries found in a folder that
is not ours are never read (`analyzer.cache`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Final

import polars as pl

import analyzer.ingest
import analyzer.schema
from analyzer.cache import CACHE_DIR

__all__ = ["KEEP", "STORED", "StoredFrames", "Writer", "read", "target"]

STORED: Final = (
    "placement",
    "rpc_messages",
    "tool_calls",
    "streams",
    "incarnations",
    "resumptions",
    "sessions",
    "exchanges",
)
"""The frames stored, by the names `build_timeline` keeps them under."""
IN_MEMORY: Final = frozenset({"placement"})
"""Frames read into memory whatever their size (every record-level scan joins to them)."""
KEEP: Final = 3
_MANIFEST: Final = "manifest.json"
_PREFIX: Final = "timeline-"
_STALE_TMP_S: Final = 3600
_left: list[Path] = []

StoredFrames = dict[str, pl.LazyFrame]


@atexit.register
def _remove_left() -> None:
    for folder in _left:
        shutil.rmtree(folder, ignore_errors=True)


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
    """Where the frames of the inputs read into these entry folders are kept: None when the
    first is not a cache entry (a private temporary folder, when the cache is off or cannot be
    written)."""
    first = next((d for d in directories if d is not None), None)
    if first is None or first.parent.name != CACHE_DIR:
        return None
    names = [d.name if d is not None else "-" for d in directories]
    text = json.dumps([_code_key(), names])
    return first / f"{_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def read(folder: Path, *, scan_from: int | None) -> StoredFrames | None:
    """The stored frames, or None when `folder` holds no complete set.

    A frame of `scan_from` rows or more (but those `IN_MEMORY`) is scanned from its file,
    as `build_timeline` keeps large frames on disk; None reads every frame into memory.
    """
    try:
        text = (folder / _MANIFEST).read_text("utf-8")
    except FileNotFoundError:
        return None  # not stored yet
    except OSError:
        return None
    try:
        manifest = json.loads(text)
        if manifest.get("key") != folder.name:
            raise ValueError("another key")
        rows = {name: int(manifest["rows"][name]) for name in STORED}
        frames: StoredFrames = {}
        for name in STORED:
            path = folder / f"{name}.parquet"
            if scan_from is not None and rows[name] >= scan_from and name not in IN_MEMORY:
                pl.read_parquet_schema(path)  # the file is there, with its footer
                frames[name] = pl.scan_parquet(path)
            else:
                frames[name] = pl.read_parquet(path).lazy()
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pl.exceptions.PolarsError):
        # Damaged (sets are renamed into place whole): removed, so that it is stored again.
        shutil.rmtree(folder, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(folder)  # recently used: kept by the pruning
    return frames


class Writer:
    """A set of frames being stored: `put` each as it is collected, then `commit`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.rows: dict[str, int] = {}
        self.staging = Path(tempfile.mkdtemp(prefix=f".tmp-{_PREFIX}", dir=folder.parent))

    def put(self, name: str, frame: pl.DataFrame) -> Path:
        """Write one frame; its file (valid until `commit`)."""
        path = self.staging / f"{name}.parquet"
        frame.write_parquet(path, compression="lz4", statistics=False)
        os.chmod(path, 0o600)
        self.rows[name] = frame.height
        return path

    def commit(self) -> bool:
        """Publish the set (False when another analysis published it first, or on an error:
        the staging folder, which a built timeline may still scan, is then removed at exit)."""
        try:
            manifest = {"key": self.folder.name, "rows": self.rows}
            (self.staging / _MANIFEST).write_text(json.dumps(manifest, sort_keys=True), "utf-8")
            os.chmod(self.staging / _MANIFEST, 0o600)
            os.rename(self.staging, self.folder)
        except OSError:
            _left.append(self.staging)
            return False
        _prune(self.folder.parent)
        return True


def _prune(entry: Path) -> None:
    """Keep the `KEEP` most recently used sets of an entry; remove stale staging folders."""
    sets = []
    now = time.time()
    for child in entry.iterdir():
        try:
            if child.name.startswith(_PREFIX):
                sets.append((child.stat().st_mtime_ns, child))
            elif (
                child.name.startswith(f".tmp-{_PREFIX}")
                and now - child.stat().st_mtime > _STALE_TMP_S
            ):
                shutil.rmtree(child, ignore_errors=True)
        except OSError:
            continue
    for _, old in sorted(sets, reverse=True)[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
