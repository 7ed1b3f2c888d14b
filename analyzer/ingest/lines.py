"""Reading capture lines into records, shared by the one-shot reader (`analyzer.ingest.jsonl`)
and the Live tail (`analyzer.ingest.tail`): which files make a capture and in what order, what
a line holds (`parse_line`: the record, or None and a count of why), and the bookkeeping of
what each record says of the capture's health (`take_record`, `mark_seq`, `missing_records`).

Apart from `head` and `plan`, which open the files to read their first record, nothing here
does I/O: the callers read the bytes and hand over lines (`plan_heads` plans files whose first
records were read elsewhere: the Spark engine's executors).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyzer.ingest.common import UnreadableInput, UnsupportedSchema
from analyzer.records import SCHEMA_MAJOR, SCHEMA_MINOR
from analyzer.schema import INT32_END, INT64_END

__all__ = [
    "BOM",
    "CaptureFile",
    "RunState",
    "capture_files",
    "check_record",
    "count_missing",
    "first_record",
    "head",
    "head_fields",
    "is_capture_file",
    "mark_seq",
    "missing_records",
    "parse_line",
    "plan",
    "plan_heads",
    "record_problem",
    "schema_version",
    "take_record",
]

BOM = b"\xef\xbb\xbf"
_HEAD_BYTES = 1 << 20
# The fields of a file's first record that `plan_heads` reads.
_PLANNED = ("kind", "schema", "run_id", "file_index", "ts_ns", "client_header", "retention")
_HOW = frozenset({"complete", "client_closed", "server_closed", "error", "open_at_shutdown"})
# Integer fields land in Int64 (seq, ts_ns, truncated_bytes) and Int32 (chunk n, status)
# columns: a value past their range is no record the writer could have written.
# `check_record` spells the hot path's bounds as literals (0x7FFF_FFFF_FFFF_FFFF is
# INT64_END - 1): a global costs a lookup.


def is_capture_file(path: Path) -> bool:
    """True for `*.jsonl` and `*.jsonl.partial` names."""
    name = path.name
    return name.endswith(".jsonl") or name.endswith(".jsonl.partial")


def capture_files(path: Path) -> list[Path]:
    """The capture files an input path names: itself, or the capture files in a directory."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and is_capture_file(p))
        if not files:
            raise UnreadableInput(f"{path}: no capture files (*.jsonl, *.jsonl.partial)")
        return files
    if path.is_file():
        return [path]
    raise UnreadableInput(f"{path}: no such file or directory")


@dataclass(frozen=True)
class CaptureFile:
    path: str
    run: str  # run_id, or a stand-in when the file has no readable capture_open
    run_id: str | None
    client_header: str | None  # the proxy's --client-header, from capture_open
    file_index: int
    first_ts: int
    size: int


@dataclass
class RunState:
    """Per-run bookkeeping of one worker."""

    breaks: list[tuple[int, int]] = field(default_factory=list)  # (position, seq)
    offset: int | None = None
    last: tuple[int, int] | None = None
    closed: bool = False
    dropped: int = 0
    addon_errors: int = 0


def _version_number(text: str) -> int | None:
    """A schema version part: ASCII digits (`str.isdigit` also takes "²"), short enough for
    `int()` (which refuses 4300 digits and more)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def schema_version(path: str, schema: object) -> tuple[int, int]:
    text = schema if isinstance(schema, str) else ""
    major_text, _, minor_text = text.partition(".")
    major = _version_number(major_text)
    if major is None:
        raise UnsupportedSchema(f"{path}: capture schema {schema!r} is not MAJOR.MINOR")
    if major != SCHEMA_MAJOR:
        raise UnsupportedSchema(
            f"{path}: capture schema {text} is not supported "
            f"(this seamwatch reads schema {SCHEMA_MAJOR}.x)"
        )
    return major, _version_number(minor_text) or 0


def head(path: Path) -> tuple[dict[str, Any] | None, int]:
    """The file's first record when it parses, and the file size."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        line = fh.readline(_HEAD_BYTES)
    return first_record(line), size


def first_record(content: bytes) -> dict[str, Any] | None:
    """The first record of a file's bytes (or of its first line) when it parses, as `head`
    reads it: the first line, up to 1 MiB."""
    end = content.find(b"\n", 0, _HEAD_BYTES)
    line = content[: end + 1 if end >= 0 else _HEAD_BYTES]
    if line.startswith(BOM):
        line = line[3:]
    try:
        first = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for json
        return None
    return first if isinstance(first, dict) else None


def head_fields(first: dict[str, Any] | None) -> dict[str, Any] | None:
    """What `plan` reads of a file's first record (a file read elsewhere sends only these)."""
    if first is None:
        return None
    return {name: first[name] for name in _PLANNED if name in first}


def plan(
    files: Sequence[Path], counts: Counter[str], cuts: dict[str, int] | None = None
) -> list[CaptureFile]:
    """Order files by run (first capture_open time) and rotation index; drop duplicates.

    `cuts` gets, per run, the last seq that retention deleted, as capture_open records it.
    """
    heads = []
    for path in files:
        first, size = head(path)
        heads.append((str(path), head_fields(first), size))
    return plan_heads(heads, counts, cuts)


def plan_heads(
    heads: Sequence[tuple[str, dict[str, Any] | None, int]],
    counts: Counter[str],
    cuts: dict[str, int] | None = None,
) -> list[CaptureFile]:
    """`plan` of files already looked at: each file's path (or URI), the `head_fields` of its
    first record, its size."""
    planned: dict[tuple[str, int], CaptureFile] = {}
    for path, first, size in heads:
        name = Path(path).name
        if cuts is not None and first is not None:
            _retention_cuts(first, cuts)
        # A run id holding a lone surrogate (a leniently read line) cannot name the run's rows.
        if (
            first is not None
            and first.get("kind") == "capture_open"
            and _text_ok(first.get("run_id"))
        ):
            _, minor = schema_version(path, first.get("schema"))
            if minor > SCHEMA_MINOR:
                counts["newer_minor"] += 1
            run = str(first.get("run_id"))
            index = first.get("file_index")
            file_index = index if isinstance(index, int) else 0
            ts = first.get("ts_ns")
            header = first.get("client_header")
            entry = CaptureFile(
                path,
                run,
                run,
                header if isinstance(header, str) else None,
                file_index,
                ts if isinstance(ts, int) else 0,
                size,
            )
        else:
            if size:
                counts["missing_open"] += 1
            entry = CaptureFile(path, f"?{name}", None, None, 0, 0, size)
        key = (entry.run, entry.file_index)
        other = planned.get(key)
        if other is not None:
            # The same rotation of a run twice (a `.partial` left beside its renamed file):
            # keep the finished one, else the longer.
            counts["duplicate_file"] += 1
            if (other.path.endswith(".partial"), -other.size) <= (
                entry.path.endswith(".partial"),
                -entry.size,
            ):
                continue
        planned[key] = entry
    run_start: dict[str, int] = {}
    for entry in planned.values():
        run_start[entry.run] = min(run_start.get(entry.run, entry.first_ts), entry.first_ts)
    return sorted(planned.values(), key=lambda f: (run_start[f.run], f.run, f.file_index, f.path))


_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "capture_open": (("schema", str), ("run_id", str)),
    "request": (("flow", str), ("method", str), ("path", str), ("headers", list)),
    "response": (("flow", str), ("status", int), ("headers", list)),
    "chunk": (("flow", str), ("n", int), ("data", dict)),
    "stream_end": (("flow", str), ("how", str)),
    "server_unreachable": (("upstream", str),),
    "capture_stats": (),
    "capture_close": (),
}

# Fields a record may leave out or set to null, else a string (they reach String columns).
_OPTIONAL_TEXT: dict[str, tuple[str, ...]] = {
    "request": ("scheme", "authority", "client", "upstream"),
    "response": ("replica", "replica_source"),
    "stream_end": ("error",),
    "server_unreachable": ("flow", "error"),
}


def _body_ok(body: object) -> bool:
    if body is None:
        return True
    if type(body) is not dict:
        return False
    text = body.get("text")
    if text is not None:
        return type(text) is str
    return type(body.get("b64")) is str


def _headers_ok(headers: list[Any]) -> bool:
    for item in headers:
        if type(item) is not list or len(item) != 2:
            return False
        if type(item[0]) is not str or type(item[1]) is not str:
            return False
    return True


def check_record(record: object) -> str | None:
    """Why a parsed line is no usable schema-1 record (a DAMAGE key), None when it is one."""
    if type(record) is not dict:
        return "invalid_record"
    kind = record.get("kind")
    required = _REQUIRED.get(kind) if type(kind) is str else None
    if required is None:
        return "unknown_kind" if type(kind) is str else "invalid_record"
    seq = record.get("seq")
    ts = record.get("ts_ns")
    if (
        type(seq) is not int
        or type(ts) is not int
        or not 0 <= seq <= 0x7FFF_FFFF_FFFF_FFFF
        or not -0x8000_0000_0000_0000 <= ts <= 0x7FFF_FFFF_FFFF_FFFF
    ):
        return "invalid_record"
    for name, expected in required:
        if type(record.get(name)) is not expected:
            return "invalid_record"
    if kind == "chunk":
        data = record["data"]
        if not _body_ok(data) or data is None or not 0 <= record["n"] <= 0x7FFF_FFFF:
            return "invalid_record"
        return _truncated_problem(data)
    for name in _OPTIONAL_TEXT.get(record["kind"], ()):  # a str, as `required` was found
        value = record.get(name)
        if value is not None and type(value) is not str:
            return "invalid_record"
    if kind == "request" or kind == "response":
        body = record.get("body")
        if not _headers_ok(record["headers"]) or not _body_ok(body):
            return "invalid_record"
        if kind == "response" and not -INT32_END <= record["status"] < INT32_END:
            return "invalid_record"
        if body is not None and _truncated_problem(body) is not None:
            return "invalid_record"
    elif kind == "stream_end" and record["how"] not in _HOW:
        return "invalid_record"
    return None


def _truncated_problem(body: dict[str, Any]) -> str | None:
    """A body's (or chunk's) `truncated_bytes`, when present, must be a count in Int64."""
    truncated = body.get("truncated_bytes")
    if truncated is None or (type(truncated) is int and 0 <= truncated < INT64_END):
        return None
    return "invalid_record"


def _text_ok(value: object) -> bool:
    """True when every string in a JSON value (keys too) is valid Unicode: no lone surrogate,
    which JSON's `\\udXXX` escapes can make and which no UTF-8 (so no Polars column) can hold."""
    stack = [value]  # not recursive: a leniently read line may nest up to json's own limit
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)  # the keys
            stack.extend(item.values())
    return True


def record_problem(record: object) -> str | None:
    """`check_record`, and for a record that may hold lone surrogates (one a lenient parser read, or
    one a reader made from a HAR file or a dump), a string other than its payload text that
    holds one makes it malformed ("invalid_record").

    Flow ids, methods, paths, header values, replicas and error texts are names the analysis
    joins and compares on: repaired (U+FFFD) they could silently merge distinct values, so the
    record is skipped and counted instead. Payload text (`body`, chunk `data`) is kept: it is
    the bytes on the wire, which normalize records as they are (DESIGN.md §4).
    """
    problem = check_record(record)
    if problem is not None:
        return problem
    assert type(record) is dict  # check_record passed
    for name, value in record.items():
        if name != "body" and name != "data" and not _text_ok(value):
            return "invalid_record"
    return None


def _retention_cuts(first: dict[str, Any], cuts: dict[str, int]) -> None:
    """Merge a capture_open's `retention.cut` (schema 1.3: per run, every record up to that
    seq was deleted by --max-size / --max-age) into `cuts`."""
    retention = first.get("retention")
    cut = retention.get("cut") if isinstance(retention, dict) else None
    if isinstance(cut, dict):
        for run, seq in cut.items():
            if type(seq) is int and isinstance(run, str):
                cuts[run] = max(cuts.get(run, -1), seq)


def parse_line(
    line: bytes, torn: bool, counts: Counter[str], from_json: Callable[..., Any]
) -> dict[str, Any] | None:
    """The record on a line, or None (counted) when the line is unusable."""
    check = check_record
    try:
        record = from_json(line, allow_inf_nan=False, cache_strings="keys")
    except ValueError:
        if not line.strip():
            counts["blank_line"] += 1
            return None
        if torn:
            counts["torn_line"] += 1
            return None
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            counts["invalid_utf8"] += 1
            return None
        try:
            # Lone surrogates or NaN: not the strict JSON the writer promises, still readable.
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for json
            counts["corrupt_line"] += 1
            return None
        counts["nonstrict_json"] += 1
        # Only this lenient parser lets lone surrogates through: they are checked for here,
        # off the fast path (pydantic-core and orjson refuse them).
        check = record_problem
    problem = check(record)
    if problem is not None:
        counts[problem] += 1
        return None
    result: dict[str, Any] = record
    return result


def take_record(
    record: dict[str, Any],
    position: int,
    file: CaptureFile,
    run: RunState,
    counts: Counter[str],
    seen_other: set[tuple[str, int]],
    add: Callable[[dict[str, Any]], None],
    mark: Callable[[tuple[int, int]], None] | None = None,
) -> None:
    kind = record["kind"]
    seq = record["seq"]
    if "flow" not in record or record["flow"] is None:
        key = (file.run, seq)
        if key in seen_other:
            counts["duplicate_record"] += 1
            return
        seen_other.add(key)
        if kind == "capture_open":
            schema_version(file.path, record["schema"])
        elif kind == "capture_close" or kind == "capture_stats":
            if kind == "capture_close":
                run.closed = True
            dropped = record.get("dropped")
            errors = record.get("addon_errors")
            if type(dropped) is int:
                run.dropped = max(run.dropped, dropped)
            if type(errors) is int:
                run.addon_errors = max(run.addon_errors, errors)
    if mark is None:
        mark_seq(run, position, seq)
    else:
        mark((position, seq))
    try:
        add(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        counts["invalid_record"] += 1


def mark_seq(run: RunState, position: int, seq: int) -> None:
    """Capture health: `seq` minus line position is constant while nothing is lost; keep only
    the places where it changes (merged across workers by the parent)."""
    offset = seq - position
    if offset != run.offset:
        run.offset = offset
        run.breaks.append((position, seq))
    run.last = (position, seq)


def missing_records(runs: Sequence[RunState]) -> int:
    """Records lost on disk in one run, from the workers' (position, seq) change points."""
    points = sorted({p for run in runs for p in [*run.breaks, *([run.last] if run.last else [])]})
    if not points:
        return 0
    missing = max(0, points[0][1] - points[0][0])
    previous = points[0][1] - points[0][0]
    for position, seq in points[1:]:
        offset = seq - position
        if offset > previous:
            missing += offset - previous
        previous = offset
    return missing


def count_missing(runs: Sequence[RunState], cut: int, counts: Counter[str]) -> None:
    """Count the records one run lost on disk (`seq_gap`); those the proxy's retention deleted
    (seq 0 up to `cut`, -1 for none) are a note (`retention_deleted`), not a loss."""
    missing = missing_records(runs)
    deleted = min(missing, cut + 1)
    counts["retention_deleted"] += deleted
    counts["seq_gap"] += missing - deleted
