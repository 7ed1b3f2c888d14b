"""A report built from a timeline and its findings, and written in one of the formats (§6).

`build_report` collects what the writers need; `write_report` renders it to a file or stdout,
`write_text` writes what was rendered from the timeline itself (`otlp-json`), and `TextOut` the
same a piece at a time (the Spark engine's `otlp-json`, never held whole). A file that cannot be
written is a `UsageError` (exit 2).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, TextIO

import polars as pl

from analyzer.command import UsageError
from analyzer.detection import Detector
from analyzer.findings import Severity
from analyzer.report import InputSummary, Report

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = ["TextOut", "build_report", "write_report", "write_text"]


def build_report(
    timeline: Timeline,
    findings: pl.DataFrame,
    detectors: Sequence[Detector],
    *,
    fail_on: Severity | None,
) -> Report:
    """Collect what the report writers need from a timeline and the findings."""
    inputs = InputSummary.each(timeline.inputs)
    # Only the flows SARIF locations need: a finding's first evidence flow.
    first_flows = findings["flow_ids"].list.first().drop_nulls().unique()
    flows = (
        timeline.exchanges.select("flow_id", "input")
        .filter(pl.col("flow_id").is_in(first_flows.implode()))
        .unique("flow_id", keep="first", maintain_order=True)
        .collect()
    )
    heights = pl.collect_all(
        [
            frame.select(pl.len())
            for frame in (
                timeline.sessions,
                timeline.streams,
                timeline.resumptions,
                timeline.tool_calls,
            )
        ]
    )
    sessions, streams, resumptions, tool_calls = (int(h.item()) for h in heights)
    origins = timeline.sessions.select("session_id", "origin").drop_nulls("origin").collect().rows()
    return Report(
        findings=findings,
        detectors=tuple(detectors),
        inputs=inputs,
        sessions=sessions,
        streams=streams,
        resumptions=resumptions,
        tool_calls=tool_calls,
        fail_on=fail_on,
        flow_inputs=dict(zip(flows["flow_id"].to_list(), flows["input"].to_list(), strict=True)),
        origins=dict(origins),
    )


def write_report(report: Report, fmt: str, out: str | None) -> None:
    """Write the report in `fmt` to the file `out`, or to stdout."""
    if out is None:
        _emit(report, fmt, sys.stdout)
        sys.stdout.flush()
        return
    try:
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            _emit(report, fmt, f)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None


def write_text(text: str, out: str | None) -> None:
    """Write text rendered from the timeline itself (`otlp-json`) to the file `out`, or stdout."""
    try:
        if out is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        Path(out).write_text(text, encoding="utf-8", newline="\n")
    except OSError as e:
        raise UsageError(f"cannot write {out or 'stdout'}: {e.strerror or e}") from None


class TextOut:
    """`write_text` a piece at a time: the file `out` (opened at the first piece, so a run that
    fails before writing leaves none), or stdout."""

    def __init__(self, out: str | None) -> None:
        self.out = out
        self._file: IO[str] | None = None

    def write(self, text: str) -> None:
        try:
            if self._file is None:
                self._file = (
                    sys.stdout
                    if self.out is None
                    else open(self.out, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 (closed by close)
                )
            self._file.write(text)
        except OSError as e:
            raise UsageError(f"cannot write {self.out or 'stdout'}: {e.strerror or e}") from None

    def close(self) -> None:
        """Flush, and close the file (nothing written: an empty one, as `write_text` of "")."""
        if self._file is None:
            self.write("")
        assert self._file is not None
        try:
            if self._file is sys.stdout:
                self._file.flush()
            else:
                self._file.close()
        except OSError as e:
            raise UsageError(f"cannot write {self.out or 'stdout'}: {e.strerror or e}") from None


def _emit(report: Report, fmt: str, stream: TextIO) -> None:
    # Each format's module is imported when it is asked for, as the progress display imports
    # rich: a run that writes JSON, JUnit or SARIF does not pay for importing the table's rich.
    if fmt == "table":
        from analyzer.report import table

        table.write(report, stream)
        return
    render: Callable[[Report], str]
    if fmt == "json":
        from analyzer.report.json import render
    elif fmt == "junit":
        from analyzer.report.junit import render
    elif fmt == "sarif":
        from analyzer.report import sarif

        # Locations name the JSONL line of each finding's first flow: read from the captures.
        stream.write(sarif.render(report, sarif.locate(report)))
        return
    else:
        raise UsageError(f"unknown format {fmt!r}")
    stream.write(render(report))
