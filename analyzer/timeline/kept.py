"""Where the collected frames of a timeline are kept: in memory, or in a spill folder.

The one spill policy, for a frame built now and for one read back from the cache alike: given a
folder, a frame of `SPILL_ROWS` rows or more (but a `memory` one, `analyzer.timeline.frames`)
waits there as a Parquet file and is scanned back: detectors read each such frame a few times,
which costs less than holding every frame of a large capture in memory while they run.
Smaller frames, and every frame without a folder, stay in memory. The caller owns the folder:
a plan read from the Timeline's frames needs it until that plan is collected for the last time.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final, Protocol

import polars as pl

from analyzer.timeline.frames import by_name

__all__ = ["COMPRESSION", "SPILL_ROWS", "Kept", "Store", "link_or_copy"]

SPILL_ROWS: Final = 50_000
COMPRESSION: Final = "uncompressed"
"""How stored and spilled frames are written: every detector scans them again, and LZ4 saved
little room on them (mostly ids and hashes) for a twentieth of an analysis from the cache
spent decoding them."""


class Store(Protocol):
    """Where the collected frames are stored too, for later analyses of the same inputs
    (`analyzer.cache.FrameWriter`)."""

    def put(self, name: str, frame: pl.DataFrame) -> Path | None:
        """Store a frame; its file, or None when it was not stored."""
        ...

    def put_file(self, name: str, source: Path, rows: int) -> None:
        """Store a frame already written to a Parquet file of `rows` rows."""
        ...


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


class Kept:
    """The frames kept so far (`frames`, by name), each as its declaration says."""

    def __init__(self, folder: Path | None, store: Store | None = None) -> None:
        self._dir = folder
        self._store = store
        self.frames: dict[str, pl.LazyFrame] = {}

    def __getitem__(self, name: str) -> pl.LazyFrame:
        return self.frames[name]

    def _spills(self, name: str, rows: int) -> bool:
        return self._dir is not None and rows >= SPILL_ROWS and by_name(name).how != "memory"

    def keep(self, name: str, plan: pl.LazyFrame) -> pl.LazyFrame:
        """Collect a frame (a `sink` one: written straight to the spill folder), store it, keep
        it."""
        frame = by_name(name)
        if frame.how == "sink" and self._dir is not None:
            return self._sink(name, plan)
        streaming = frame.streaming or frame.how == "sink"
        collected = plan.collect(engine="streaming" if streaming else "in-memory")
        stored = self._store.put(name, collected) if self._store is not None else None
        kept = collected.lazy()
        if self._dir is not None and self._spills(name, collected.height):
            path = self._dir / f"{name}.parquet"
            # The stored file, linked or copied (the staging folder goes at commit); else written.
            if stored is None or not link_or_copy(stored, path):
                collected.write_parquet(path, compression=COMPRESSION, statistics=False)
            kept = pl.scan_parquet(path)
        self.frames[name] = kept
        return kept

    def _sink(self, name: str, plan: pl.LazyFrame) -> pl.LazyFrame:
        assert self._dir is not None
        path = self._dir / f"{name}.parquet"
        try:
            plan.sink_parquet(path, compression=COMPRESSION, statistics=False)
        except (OSError, pl.exceptions.PolarsError):  # no room in the folder: held in memory
            path.unlink(missing_ok=True)
            kept = plan.collect(engine="streaming")
            if self._store is not None:
                self._store.put(name, kept)
            self.frames[name] = kept.lazy()
            return self.frames[name]
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        if self._store is not None:
            self._store.put_file(name, path, rows)
        return self.adopt(name, path, rows, own=True)

    def adopt(self, name: str, path: Path, rows: int, *, own: bool = False) -> pl.LazyFrame:
        """Keep a frame written to a Parquet file of `rows` rows (stored by an earlier analysis,
        or `own`: written into the spill folder): scanned from the spill folder when it spills,
        else read into memory (also when the folder has no room for a copy)."""
        if self._spills(name, rows):
            assert self._dir is not None
            if own:
                kept = pl.scan_parquet(path)
                self.frames[name] = kept
                return kept
            copy = self._dir / f"stored-{name}.parquet"
            if link_or_copy(path, copy):
                self.frames[name] = pl.scan_parquet(copy)
                return self.frames[name]
        self.frames[name] = pl.read_parquet(path).lazy()
        return self.frames[name]
