"""`seamwatch analyze` and `seamwatch baseline write`: inputs -> timeline -> detectors -> report,
the exit code, and what the user sees while it runs (DESIGN.md §6).

Exit codes: 0 when no finding is at or above `--fail-on` (default medium; `none` never fails),
1 when one is, 2 for bad usage or unreadable input (`UsageError`, a one-line reason on stderr),
3 for an internal error (`analyzer.cli.main` says what failed and where its traceback went).
Damaged input that can still be read (a torn tail, corrupt lines) is not exit 2: the reader
reports it and `capture-health` turns it into findings.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer import SeamwatchError
from analyzer.analysis import load_timeline
from analyzer.baseline import (
    Baseline,
    BaselineError,
    apply_baseline,
    baseline_from,
    load_baseline,
    render_baseline,
)
from analyzer.command import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageError,
    one_line,
    parse_ids,
    writable_by_others,
)
from analyzer.detectors import (
    ConfigError,
    Detector,
    DetectorConfig,
    load_config,
    run_detectors,
    select_detectors,
)
from analyzer.findings import Severity
from analyzer.report import Report, at_or_above
from analyzer.report.run import TextOut, build_report, write_report, write_text
from analyzer.scratch import scratch_prefix

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = [
    "analyze_command",
    "analyze_paths",
    "baseline_write_command",
    "detector_options",
    "exit_code",
    "parse_fail_on",
]


def exit_code(findings: pl.DataFrame, fail_on: Severity | None) -> int:
    """1 when a finding is at or above `fail_on` (never for None, i.e. `none`), else 0."""
    return EXIT_FINDINGS if at_or_above(findings, fail_on).height else EXIT_OK


def parse_fail_on(text: str) -> Severity | None:
    """The `--fail-on` value: a severity name, or None for `none`; UsageError otherwise."""
    if text.strip().lower() == "none":
        return None
    try:
        return Severity.parse(text)
    except ValueError as e:
        raise UsageError(f"--fail-on: {e}; or none") from None


def analyze_command(args: argparse.Namespace) -> int:
    """Run `seamwatch analyze` with parsed arguments; return the exit code."""
    fail_on = parse_fail_on(args.fail_on)
    baseline = _read_baseline(args.baseline)
    _check_out(args.out)
    traces: list[str] = []
    otlp_asked = args.format == "otlp-json"
    # The Spark engine writes the document as it comes, while its rows are still there.
    streamed = TextOut(args.out) if otlp_asked else None

    def otlp(timeline: Timeline, findings: pl.DataFrame) -> None:
        from analyzer.otlp.command import otlp_json

        traces.append(otlp_json(timeline, findings, payloads=args.otlp_payloads))

    report = analyze_paths(
        args, fail_on=fail_on, on_timeline=otlp if otlp_asked else None, otlp_out=streamed
    )
    if baseline is not None:
        report = report.with_baseline(apply_baseline(report.findings, baseline, path=args.baseline))
    if traces:
        write_text(traces[0], args.out)
    elif streamed is not None:
        streamed.close()
    else:
        write_report(report, args.format, args.out)
    return exit_code(report.new_findings, fail_on)


def baseline_write_command(args: argparse.Namespace) -> int:
    """Run `seamwatch baseline write`: record the current findings' fingerprints in `--out`
    (reasons already in that file are kept); exit 0."""
    out = Path(args.out)
    _check_out(args.out)
    previous = _read_baseline(args.out) if out.is_file() else None
    report = analyze_paths(args, fail_on=None)
    baseline = baseline_from(report.findings, reason=args.reason, previous=previous)
    try:
        out.write_text(render_baseline(baseline), encoding="utf-8", newline="\n")
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"seamwatch: {len(baseline.entries)} finding(s) recorded in {out}", file=sys.stderr)
    return EXIT_OK


def analyze_paths(
    args: argparse.Namespace,
    *,
    fail_on: Severity | None,
    on_timeline: Callable[[Timeline, pl.DataFrame], None] | None = None,
    otlp_out: TextOut | None = None,
) -> Report:
    """Read the inputs `args.paths` with the analysis options and run the detectors chosen:
    the report of `analyze` and `baseline write`. `on_timeline` is given the default engine's
    timeline and findings; the Spark engine, which holds no timeline, writes the OTLP document
    to `otlp_out` instead."""
    only, disable, config = detector_options(args)
    spark = getattr(args, "engine", "polars") == "spark"
    paths = [Path(p) for p in args.paths]
    if spark:
        # Spark, pyarrow and the engine's modules load only for this engine: an analysis on the
        # default engine does not pay their import at every start.
        from analyzer.spark.cache import is_uri
    for path in paths:
        if spark and is_uri(str(path)):
            continue  # listed by Spark's file system (analyzer.spark.inputs)
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        _name_files_others_could_plant(path)
    if spark:
        return _spark_report(args, args.paths, only, disable, config, fail_on, otlp_out)

    # Large timeline frames wait on disk while the detectors read them, so memory follows what
    # a detector keeps rather than the capture's size; the folder lives as long as the analysis.
    scratch = tempfile.TemporaryDirectory(prefix=scratch_prefix("spill"))
    with _progress() as progress, scratch as spill, _warnings_on_stderr():
        progress.step("reading inputs")
        timeline = load_timeline(
            paths,
            replica_header=args.replica_header,
            client_header=args.client_header,
            use_cache=not args.no_cache,
            on_progress=progress.read,
            on_step=progress.step,
            spill_dir=Path(spill),
        )
        chosen = select_detectors(only=only, disable=disable)
        total = len(chosen)
        seen: list[str] = []

        def on_start(det: Detector) -> None:
            seen.append(det.id)
            progress.step(f"detector {len(seen)}/{total}: {det.id}")

        findings = run_detectors(
            timeline, only=only, disable=disable, config=config, on_start=on_start
        )
        progress.step("writing report")
        if on_timeline is not None:
            # Built from the timeline itself, so before its spill folder goes.
            on_timeline(timeline, findings)
        return build_report(timeline, findings, chosen, fail_on=fail_on)


def _spark_report(
    args: argparse.Namespace,
    paths: Sequence[str],
    only: list[str] | None,
    disable: list[str] | None,
    config: DetectorConfig | None,
    fail_on: Severity | None,
    otlp_out: TextOut | None,
) -> Report:
    """`analyze_paths` on the Spark engine (`analyzer.spark`): the same report, and with
    `otlp_out` the same OTLP document."""
    from analyzer.spark import DEFAULT_MASTER, OtlpOut, analyze_spark

    otlp = None
    if otlp_out is not None:
        otlp = OtlpOut(otlp_out.write, payloads=bool(getattr(args, "otlp_payloads", False)))

    try:
        return analyze_spark(
            paths,
            master=args.master or DEFAULT_MASTER,
            replica_header=args.replica_header,
            client_header=args.client_header,
            cache=not args.no_cache,
            cache_dir=getattr(args, "cache_dir", None),
            only=only,
            disable=disable,
            config=config,
            fail_on=fail_on,
            otlp=otlp,
        )
    except SeamwatchError as e:  # pyspark or Java missing, an unreadable input
        raise UsageError(one_line(e)) from None


def detector_options(
    args: argparse.Namespace,
) -> tuple[list[str] | None, list[str] | None, DetectorConfig]:
    """`--only`, `--disable` and `--config` read and checked (UsageError, before any input is
    read): the part of the one set of analysis options that picks and tunes detectors."""
    only, disable = parse_ids(args.only), parse_ids(args.disable)
    try:
        select_detectors(only=only, disable=disable)
        config: DetectorConfig = load_config(Path(args.config)) if args.config else {}
    except ConfigError as e:
        raise UsageError(one_line(e)) from None
    return only, disable, config


def _read_baseline(path: str | None) -> Baseline | None:
    """The `--baseline` file, read before any input (a bad one is exit 2)."""
    if path is None:
        return None
    try:
        return load_baseline(Path(path))
    except BaselineError as e:
        raise UsageError(str(e)) from None


def _name_files_others_could_plant(path: Path) -> None:
    """Warn, naming each file merged from it, when a capture folder is writable by others: any
    of them may have planted or replaced one."""
    from analyzer.ingest import IngestError, input_kind
    from analyzer.ingest.jsonl import capture_files

    if not path.is_dir() or not writable_by_others(path):
        return
    try:
        names = [f.name for f in capture_files(path)] if input_kind(path) == "capture" else []
    except (IngestError, OSError):
        return  # said as an error when the folder is read
    print(
        f"seamwatch: warning: {path} is writable by other users; merging from it: "
        + ", ".join(names),
        file=sys.stderr,
    )


def _check_out(out: str | None) -> None:
    """UsageError unless the report file `out` can be written; checked before reading inputs.

    The file is still written only at the end, and a failure then is still exit 2 (`write_report`):
    this only spares the user an analysis whose report has nowhere to go.
    """
    if out is None:
        return
    path = Path(out)
    folder = path.parent  # "." for a bare file name
    if path.is_dir():
        raise UsageError(f"cannot write {out}: it is a directory")
    if not folder.is_dir():
        reason = "not a directory" if folder.exists() else "no such directory"
        raise UsageError(f"cannot write {out}: {folder}: {reason}")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise UsageError(f"cannot write {out}: permission denied")


class _Warning(logging.Handler):
    """The library's warnings (a damaged cache entry set aside, a cache that could not be
    written) as one `seamwatch: warning:` line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"seamwatch: warning: {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    library = logging.getLogger("analyzer")
    handler = _Warning(logging.WARNING)
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)


class _Progress:
    """What the analysis tells the user as it goes: a byte bar per parsed capture, a step."""

    def __init__(self, bars: Any = None) -> None:
        self._bars = bars  # a rich Progress on a terminal, else None (say nothing)
        self._tasks: dict[str, Any] = {}
        self._step: Any = None

    def read(self, path: str, done: int, total: int) -> None:
        if self._bars is None:
            return
        if path not in self._tasks:
            self._tasks[path] = self._bars.add_task(f"parsing {path}", total=total)
        self._bars.update(self._tasks[path], completed=done)

    def step(self, text: str) -> None:
        if self._bars is None:
            return
        if self._step is None:
            self._step = self._bars.add_task(text, total=None)
        self._bars.update(self._step, description=text)


@contextlib.contextmanager
def _progress() -> Iterator[_Progress]:
    """Progress on stderr while the analysis runs, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield _Progress()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Bytes(DownloadColumn):
        """Bytes done of a parse; nothing for a step (no total: rich would say "0/? bytes")."""

        def render(self, task: Task) -> Text:
            return Text("") if task.total is None else super().render(task)

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        Bytes(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bars:
        yield _Progress(bars)
