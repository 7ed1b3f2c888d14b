"""What every input reader shares: the input report, the errors, and the Parquet part writer."""

from __future__ import annotations

import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from analyzer import UserError
from analyzer.inputs import InputReport
from analyzer.normalize import NormalizedFrames, Normalizer

__all__ = [
    "DAMAGE",
    "PROGRESS_EVERY_S",
    "HalfMeter",
    "IngestError",
    "InputReport",
    "PartWriter",
    "Progress",
    "RecordMaker",
    "UnreadableInput",
    "UnsupportedSchema",
    "describe_counts",
    "finished_report",
    "normalize_to_parts",
    "os_reason",
    "paused_gc",
]


Progress = Callable[[int, int], None]
"""`progress(done, total)`: how many of an input's bytes are handled so far."""

PROGRESS_EVERY_S = 0.25
"""How often readers report progress at most (seconds)."""


class HalfMeter:
    """Progress of a reader that loads a whole input (a dump, a HAR file), then converts it:
    loading counts for the first half of the input's bytes, converting for the second (each
    item by the bytes it took in the input, or its share of them). Calls `progress` at most
    every 0.25 s, and once at the end."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self._progress = progress
        self._loaded = 0
        self._converted = 0
        self._next = 0.0

    def read(self, loaded: int) -> None:
        """`loaded` bytes of the input are loaded."""
        self._loaded = loaded
        self._tell()

    def handled(self, size: int) -> None:
        """An item that took `size` bytes of the input is about to be converted."""
        self._loaded = self.total
        self._converted += size
        self._tell()

    def done(self) -> None:
        if self._progress is not None:
            self._progress(self.total, self.total)

    def _tell(self) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if now >= self._next:
            self._next = now + PROGRESS_EVERY_S
            done = (self._loaded + min(self._converted, self.total)) // 2
            self._progress(min(done, self.total), self.total)


class IngestError(UserError):
    """Root of ingest errors: an input that cannot be analyzed at all (the CLI exits 2, in one
    line, as for every `UserError`)."""


def os_reason(path: Path, error: OSError) -> str:
    """`path: reason` for an input that failed to read, naming the file inside it that failed
    when that is another one (a capture file of a folder, a part of the cache)."""
    reason = error.strerror or str(error)
    if error.filename is not None and str(error.filename) != str(path):
        return f"{path}: {error.filename}: {reason}"
    return f"{path}: {reason}"


class UnreadableInput(IngestError):
    """A path that does not exist, cannot be read, or is no capture, dump or HAR file."""


class UnsupportedSchema(IngestError):
    """A capture written in a schema major version this analyzer does not know."""


# Damage and notes an input can carry, with the words of its warning. The keys are stable:
# the capture-health detector and the JSON report read them. Counted "lines" are skipped.
DAMAGE: Mapping[str, str] = {
    "torn_line": "torn last line(s) skipped",
    "corrupt_line": "corrupt line(s) skipped (not JSON)",
    "invalid_utf8": "line(s) with invalid UTF-8 skipped",
    "invalid_record": "malformed record(s) skipped",
    "unknown_kind": "record(s) of an unknown kind skipped",
    "blank_line": "blank line(s) skipped",
    "bom": "byte order mark(s) stripped",
    "nonstrict_json": "line(s) that are not strict JSON read leniently",
    "duplicate_record": "duplicated record(s) skipped",
    "duplicate_file": "duplicated capture file(s) ignored",
    "duplicate_input": "input(s) already read through another path, ignored",
    "duplicate_flow": "flow(s) already read from an earlier input, ignored",
    "seq_gap": "record(s) missing (gaps in seq)",
    "missing_close": "run(s) without capture_close (unclean stop)",
    "missing_open": "file(s) without capture_open",
    "retention_deleted": "record(s) deleted by the proxy's retention (--max-size, --max-age)",
    "chunk_gap": "chunk record(s) missing within responses",
    "late_record": "record(s) after their stream's end skipped",
    "writer_dropped": "record(s) dropped by the capture writer (queue full or failed write)",
    "addon_errors": "capture addon error(s)",
    "server_unreachable": "connection(s) to the upstream failed",
    "newer_minor": "file(s) of a newer schema minor version (unknown fields ignored)",
    "body_missing": "streamed response body(ies) not kept by the dump",
    "undecoded_body": "response body(ies) the proxy could not wholly decode (content coding)",
    "har_missing_text": "response content(s) without text in the HAR",
    "har_bad_entry": "HAR entry(ies) skipped (malformed)",
    "mitm_bad_flow": "dump flow(s) skipped (unreadable)",
    "mitm_damaged": "dump damaged: the rest after the last readable flow skipped",
    "empty_input": "input(s) without any HTTP flow (empty)",
}

# Counts that stand for skipped lines (the `skipped` of the report).
SKIPPED_KEYS = frozenset(
    {
        "torn_line",
        "corrupt_line",
        "invalid_utf8",
        "invalid_record",
        "unknown_kind",
        "blank_line",
        "duplicate_record",
        "late_record",
    }
)


def describe_counts(counts: Mapping[str, int]) -> tuple[str, ...]:
    """One warning sentence per non-zero count, in `DAMAGE` order."""
    out = []
    for key, words in DAMAGE.items():
        n = counts.get(key, 0)
        if n:
            out.append(f"{n} {words}")
    for key in sorted(set(counts) - set(DAMAGE)):
        if counts[key]:
            out.append(f"{counts[key]} {key.replace('_', ' ')}")
    return tuple(out)


class PartWriter:
    """Writes normalized batches as Parquet parts `<table>-<prefix>-<n>.parquet` in a folder."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.prefix = prefix
        self._n = 0

    def write(self, frames: NormalizedFrames) -> None:
        for table in ("flows", "events", "messages", "tools", "payloads"):
            frame = getattr(frames, table)
            if frame.height == 0:
                continue
            path = self.directory / f"{table}-{self.prefix}-{self._n:05d}.parquet"
            frame.write_parquet(path, compression="zstd", compression_level=1, statistics=True)
            os.chmod(path, 0o600)
        self._n += 1


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run without the cyclic garbage collector (restored after).

    Normalizing makes millions of short-lived, acyclic objects; the collector would rescan the
    growing column lists again and again (a quarter of the time). Reference counting frees them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def normalize_to_parts(
    records: Iterable[dict[str, Any]],
    out_dir: Path,
    prefix: str,
    *,
    replica_header: str | None,
    client_header: str | None,
) -> tuple[int, Counter[str]]:
    """Feed synthesized records through a Normalizer into Parquet parts; (records, counts)."""
    normalizer = Normalizer(replica_header=replica_header, client_header=client_header)
    writer = PartWriter(out_dir, prefix)
    with paused_gc():
        for record in records:
            normalizer.add(record)
            if normalizer.pending_events() >= normalizer.batch_events:
                writer.write(normalizer.drain())
        writer.write(normalizer.finish())
    return normalizer.records, normalizer.counts


def finished_report(path: Path, kind: str, records: int, counts: Mapping[str, int]) -> InputReport:
    """The report of a dump or HAR input."""
    clean = {key: n for key, n in sorted(counts.items()) if n}
    return InputReport(
        path=str(path),
        kind=kind,
        records=records,
        skipped=sum(n for key, n in clean.items() if key in SKIPPED_KEYS)
        + clean.get("har_bad_entry", 0)
        + clean.get("mitm_bad_flow", 0),
        counts=clean,
        warnings=describe_counts(clean),
        files=(str(path),),
    )


class RecordMaker:
    """Stamps synthesized records with `seq` and nanosecond times (dumps and HAR)."""

    def __init__(self) -> None:
        self.seq = 0

    def make(self, kind: str, ts_ns: int, **fields: Any) -> dict[str, Any]:
        record = {"kind": kind, "seq": self.seq, "ts_ns": ts_ns, "mono_ns": ts_ns, **fields}
        self.seq += 1
        return record
