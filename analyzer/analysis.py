"""An analysis's timeline from its inputs: the one place that reads inputs (through the parse
cache), calls the transform (`analyzer.timeline`) and stores or reads back its frames
(`analyzer.cache.frames`), for the commands (`analyze`, `export`), the dashboard and the pytest
plugin; and the Live page's timeline of a capture still being written (`LiveTimeline`)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from analyzer import SeamwatchError
from analyzer import schema as S
from analyzer.cache import FrameWriter, frame_set, read_frames, read_through
from analyzer.command import UsageError, one_line
from analyzer.ingest import Ingested, read_inputs
from analyzer.ingest.tail import CaptureTail
from analyzer.timeline import RawTables, Timeline, assemble, build_timeline
from analyzer.timeline.frames import STORED
from analyzer.timeline.kept import Kept

__all__ = ["LiveTimeline", "load_timeline", "raw_tables", "read_timeline"]


def raw_tables(ingested: Ingested) -> RawTables:
    """The normalized tables of the inputs read, as lazy scans of their Parquet parts."""
    parts = [
        sorted(directory.glob("payloads-*.parquet"))
        for directory in ingested.directories
        if directory is not None
    ]
    files = [f for group in parts for f in group]
    return RawTables(
        flows=ingested.scan("flows"),
        events=ingested.scan("events"),
        messages=ingested.scan("messages"),
        tools=ingested.scan("tools"),
        payloads=ingested.scan("payloads"),
        payload_rows=pl.scan_parquet(files, schema=S.PAYLOADS) if files else None,
    )


def read_timeline(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    workers: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    spill_dir: Path | None = None,
) -> Timeline:
    """Read the inputs (through the Parquet cache) and build their timeline (`spill_dir`: see
    `build_timeline`). With the cache, the collected frames of the timeline are read from it
    when an earlier analysis of the same inputs stored them, and stored otherwise; a cache that
    fails to read is read around (`analyzer.cache.read_through`). `on_progress` is told how far
    each parse is, `on_step` when the timeline is built rather than read from the cache.
    Unreadable input raises `IngestError`."""

    def load(use_cache: bool) -> Timeline:
        return _timeline(
            paths,
            replica_header=replica_header,
            client_header=client_header,
            cache=use_cache,
            workers=workers,
            on_progress=on_progress,
            on_step=on_step,
            spill_dir=spill_dir,
        )

    return read_through(load, use_cache=cache)


def _timeline(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None,
    client_header: str | None,
    cache: bool,
    workers: int | None,
    on_progress: Callable[[str, int, int], None] | None,
    on_step: Callable[[str], None] | None,
    spill_dir: Path | None,
) -> Timeline:
    """`read_timeline` without its retries."""
    ingested = read_inputs(
        paths,
        replica_header=replica_header,
        client_header=client_header,
        cache=cache,
        workers=workers,
        on_progress=on_progress,
    )
    raw = raw_tables(ingested)
    folder = frame_set(ingested.directories) if cache else None
    if folder is not None:
        kept = Kept(spill_dir)
        if read_frames(folder, STORED, kept.adopt):
            return assemble(raw, ingested.inputs, kept.frames)
    if on_step is not None:
        on_step("building the timeline")
    # None: nothing is stored (no cache, or the entry cannot be written to).
    writer = FrameWriter.start(folder, STORED) if folder is not None else None
    try:
        built = build_timeline(raw, ingested.inputs, spill_dir=spill_dir, store=writer)
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise
    if writer is not None:
        writer.commit()
    return built


def load_timeline(
    paths: Sequence[Path],
    *,
    replica_header: str | None,
    client_header: str | None,
    use_cache: bool,
    on_progress: Callable[[str, int, int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    spill_dir: Path | None = None,
) -> Timeline:
    """`read_timeline` for a command: unreadable input is a UsageError (exit 2)."""
    try:
        return read_timeline(
            paths,
            replica_header=replica_header,
            client_header=client_header,
            cache=use_cache,
            on_progress=on_progress,
            on_step=on_step,
            spill_dir=spill_dir,
        )
    except (SeamwatchError, OSError) as e:  # an `IngestError` is a SeamwatchError
        raise UsageError(one_line(e)) from None


class LiveTimeline:
    """The timeline of what a `CaptureTail` read so far, rebuilt only after a poll that changed
    its tables (its `version`).

    A Timeline handed out holds the tail's part files it scans and its spill folder while it is
    alive, even after later polls compacted or dropped them, a restart, or `close()`. Safe to
    share between threads (the Live page of several browser tabs).
    """

    def __init__(self, tail: CaptureTail) -> None:
        self.tail = tail
        self._lock = threading.Lock()
        self._built: tuple[int, Timeline] | None = None

    def timeline(self) -> Timeline:
        """The timeline of everything the tail read so far (the one built last when no poll
        changed the tables since)."""
        with self._lock:
            if self._built is not None and self._built[0] == self.tail.version:
                return self._built[1]
            tables = self.tail.tables()
            raw = RawTables(**tables.scans, payload_rows=tables.payload_rows)
            built = build_timeline(raw, [tables.report], spill_dir=tables.spill_dir)
            weakref.finalize(built, _hold, tables.keep)
            self._built = (tables.version, built)
            return built

    def close(self) -> None:
        """Let go of the timeline built last and close the tail (`CaptureTail.close`)."""
        with self._lock:
            self._built = None
            self.tail.close()


def _hold(*_: object) -> None:
    """A finalizer's callback that does nothing: its arguments live as long as its object."""
