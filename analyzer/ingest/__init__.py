"""Ingest: read seamwatch captures, mitmproxy dumps and HAR files into normalized tables.

`read_inputs(paths)` tells each path's kind, reads it (or finds its normalized tables in the
Parquet cache, `analyzer.cache`) and returns an `Ingested`: the reports of the inputs and lazy
scans of their tables, concatenated, with an `input` column on the flows. Dumps and HAR files
are turned into the same records a capture holds, so everything downstream is shared.
"""

from __future__ import annotations

import logging
import stat
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import polars as pl

from analyzer import schema as S
from analyzer.cache import CacheEntry, EntryBuilder, build_entry, find_entry, input_key
from analyzer.ingest.common import (
    IngestError,
    InputReport,
    UnreadableInput,
    UnsupportedSchema,
    describe_counts,
    os_reason,
)
from analyzer.ingest.jsonl import capture_files, is_capture_file

log = logging.getLogger(__name__)

__all__ = [
    "IngestError",
    "Ingested",
    "InputReport",
    "UnreadableInput",
    "UnsupportedSchema",
    "input_kind",
    "read_inputs",
]


def input_kind(path: Path) -> str:
    """capture, mitm or har: by the name, else by the first bytes."""
    odd = _special_file(path)
    if odd is not None:
        raise UnreadableInput(f"{path}: {odd}, not a file or folder of captures")
    if path.is_dir() or is_capture_file(path):
        return "capture"
    if not path.is_file():
        raise UnreadableInput(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    if suffix == ".har":
        return "har"
    if suffix in (".mitm", ".flows", ".dump"):
        return "mitm"
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    if head.startswith(b"{"):
        return "capture" if b'"kind"' in head.split(b"\n", 1)[0] else "har"
    if head[:1].isdigit():
        return "mitm"  # tnetstring: "<length>:"
    raise UnreadableInput(f"{path}: not a seamwatch capture, mitmproxy dump or HAR file")


def _special_file(path: Path) -> str | None:
    """What `path` is when it exists but is neither a regular file nor a folder (a FIFO would
    block the reader; a device or socket holds no capture)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return None


@dataclass(frozen=True)
class Ingested:
    """The inputs read: their reports and where their normalized tables are."""

    inputs: tuple[InputReport, ...]
    directories: tuple[Path | None, ...]  # None for an input skipped as already read
    # Per input, the ids of its flows that an earlier input holds too (the same capture under
    # two paths, or a copy of some of its files): left out of its tables. None when none.
    repeated: tuple[pl.DataFrame | None, ...]

    def scan(self, table: str) -> pl.LazyFrame:
        """One normalized table over all inputs (flows get the `input` index column)."""
        schema = S.RAW_TABLES[table]
        frames = []
        for index, directory in enumerate(self.directories):
            if directory is None:
                continue
            files = sorted(directory.glob(f"{table}-*.parquet"))
            if not files:
                continue
            frame = pl.scan_parquet(files, schema=schema)
            repeated = self.repeated[index]
            if repeated is not None and "flow_id" in schema:
                frame = frame.join(repeated.lazy(), on="flow_id", how="anti")
            if table == "flows":
                frame = frame.with_columns(pl.lit(index, pl.Int32).alias("input"))
            frames.append(frame)
        if not frames:
            empty = S.empty(schema).lazy()
            if table == "flows":
                empty = empty.with_columns(pl.lit(None, pl.Int32).alias("input"))
            return empty
        scanned = pl.concat(frames, how="vertical")
        if table == "payloads":
            scanned = scanned.unique("data_hash", keep="any")
        return scanned


def _files_of(path: Path, kind: str) -> list[Path]:
    return capture_files(path) if kind == "capture" else [path]


def read_inputs(
    paths: Sequence[str | Path],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    workers: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Ingested:
    """Read every input (from its cache when valid); raise IngestError if one is unusable.

    `replica_header` names the response header identifying a replica (it overrides what a
    capture recorded); `client_header` the request header naming a client (2026 sessions).
    `on_progress(path, done, total)` follows the bytes of an input being parsed (not cached).
    A flow that an earlier input holds too is left out of the later one's tables, and counted
    in its report (`duplicate_flow`).
    """
    reports: list[InputReport] = []
    directories: list[Path | None] = []
    seen_files: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        kind = input_kind(path)
        files = _files_of(path, kind)
        resolved = {f.resolve() for f in files}
        if resolved <= seen_files:
            reports.append(
                InputReport(str(path), kind, 0, 0, {"duplicate_input": 1}, ("already read",), ())
            )
            directories.append(None)
            continue
        seen_files |= resolved
        try:
            key = input_key(kind, files, replica_header=replica_header, client_header=client_header)
        except OSError as e:
            raise UnreadableInput(os_reason(path, e)) from e
        entry = find_entry(path, key) if cache else None
        if entry is None:
            progress = None
            if on_progress is not None:
                progress = partial(on_progress, str(path))
            entry = _parse(path, kind, key, replica_header, client_header, cache, workers, progress)
        reports.append(_report_from(entry, path))
        directories.append(entry.directory)
    repeated = _repeated_flows(directories)
    for index, flows in enumerate(repeated):
        if flows is not None:
            report = reports[index]
            counts = {**report.counts, "duplicate_flow": flows.height}
            reports[index] = replace(report, counts=counts, warnings=describe_counts(counts))
    return Ingested(tuple(reports), tuple(directories), tuple(repeated))


def _repeated_flows(directories: Sequence[Path | None]) -> list[pl.DataFrame | None]:
    """Per input, its flow ids that an earlier input read too (None when there are none).

    Flow ids are unique per flow (mitmproxy's UUIDs; HAR entries are named by the file's
    content): one seen in two inputs is the same flow read twice, which would otherwise count
    every event twice and pair each copy with the other as a duplicate.
    """
    parts = [
        (i, sorted(d.glob("flows-*.parquet"))) for i, d in enumerate(directories) if d is not None
    ]
    scans = [
        pl.scan_parquet(files, schema=S.RAW_FLOWS)
        .select("flow_id")
        .with_columns(pl.lit(i, pl.Int32).alias("input"))
        for i, files in parts
        if files
    ]
    found: list[pl.DataFrame | None] = [None] * len(directories)
    if len(scans) < 2:
        return found
    first = pl.col("input").min().over("flow_id")
    later = pl.concat(scans).filter(pl.col("input") > first).unique().collect()
    for (index,), flows in later.partition_by("input", as_dict=True).items():
        found[int(index)] = flows.select("flow_id")
    return found


def _parse(
    path: Path,
    kind: str,
    key: str,
    replica_header: str | None,
    client_header: str | None,
    cache: bool,
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> CacheEntry:
    def read(builder: EntryBuilder) -> CacheEntry:
        try:
            report = _read(
                path, kind, builder.directory, replica_header, client_header, workers, progress
            )
            return builder.commit(_manifest(report))
        except BaseException:
            builder.abandon()
            raise

    builder = build_entry(path, key, use_cache=cache)
    if builder.root is None:
        return read(builder)
    try:
        return read(builder)
    except (OSError, pl.exceptions.PolarsError, IngestError):
        trouble = builder.trouble()
        if trouble is None:
            raise  # the cache could take more: the input is to blame
    # Writing the cache failed (a full disk, the folder deleted meanwhile): parse again into a
    # private temporary folder, as when the folder is not writable at all.
    log.warning(
        "%s: cannot write the cache in %s (%s): reading without it", path, builder.root, trouble
    )
    return read(build_entry(path, key, use_cache=False))


def _manifest(report: InputReport) -> dict[str, object]:
    return {
        "report": {
            "path": report.path,
            "kind": report.kind,
            "records": report.records,
            "skipped": report.skipped,
            "counts": dict(report.counts),
            "files": list(report.files),
        }
    }


def _read(
    path: Path,
    kind: str,
    out_dir: Path,
    replica_header: str | None,
    client_header: str | None,
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> InputReport:
    if kind == "capture":
        from analyzer.ingest.jsonl import read_capture

        return read_capture(
            path,
            out_dir,
            replica_header=replica_header,
            client_header=client_header,
            workers=workers,
            progress=progress,
        )
    if kind == "har":
        from analyzer.ingest.har import read_har

        return read_har(
            path,
            out_dir,
            replica_header=replica_header,
            client_header=client_header,
            progress=progress,
        )
    from analyzer.ingest.mitm import read_mitm

    return read_mitm(
        path, out_dir, replica_header=replica_header, client_header=client_header, progress=progress
    )


def _report_from(entry: CacheEntry, path: Path) -> InputReport:
    """The input report an entry holds, for `path` as given now (the entry may have been made
    for the same files under another path: a symlink, a relative or absolute one)."""
    data = entry.manifest.get("report", {})
    folder = path if path.is_dir() else None  # else a single file, the input itself
    counts = Counter({str(k): int(v) for k, v in dict(data.get("counts", {})).items()})
    report = InputReport(
        path=str(path),
        kind=str(data.get("kind", "")),
        records=int(data.get("records", 0)),
        skipped=int(data.get("skipped", 0)),
        counts=dict(counts),
        warnings=describe_counts(counts),
        files=tuple(str(folder / Path(f).name if folder else path) for f in data.get("files", ())),
    )
    return replace(report, cached=entry.cached)
