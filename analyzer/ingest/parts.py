"""The tail's Parquet parts and private folder: files removed once nothing scans them."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Final

import polars as pl

from analyzer.scratch import scratch_prefix

__all__ = ["MAX_SMALL", "SMALL_BYTES", "Part", "SpillFolder", "Store", "write_part"]

# Each poll that reads something adds a small part per table: once more than `MAX_SMALL`
# parts under `SMALL_BYTES` trail a table, they are merged into one (a bounded rewrite), so
# a page left polling for hours scans a few files per table, not thousands.
SMALL_BYTES: Final = 4 << 20
MAX_SMALL: Final = 16


class Store:
    """The tail's private folder (mode 0700): its Parquet parts and the spill folders of
    what is built from them.

    Removed (with what it holds) when the last reference to it goes: the tail's, and those of
    the parts and spill folders that built timelines still hold; else at interpreter exit.
    """

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=scratch_prefix("tail")))
        self._numbers = itertools.count()
        weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)

    def part_path(self, table: str) -> Path:
        return self.path / f"{table}-{next(self._numbers):08d}.parquet"


class Part:
    """One Parquet part file: deleted when nothing scans it any more (see `Store`)."""

    def __init__(self, store: Store, path: Path, rows: int) -> None:
        self.store = store  # the folder lives as long as its files are needed
        self.path = path
        self.rows = rows
        self.size = path.stat().st_size
        weakref.finalize(self, _unlink, str(path))


class SpillFolder:
    """A folder for what is built from one `tables()` (a timeline's spill): removed when
    nothing holds it any more."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = Path(tempfile.mkdtemp(prefix="timeline-", dir=store.path))
        weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):  # removed with its folder already
        os.unlink(path)


def write_part(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path, compression="zstd", compression_level=1, statistics=True)
    os.chmod(path, 0o600)
