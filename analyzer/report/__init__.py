"""Reports of one analysis: table, JSON, JUnit and SARIF (DESIGN.md §6).

Every writer takes a `Report` and writes text; none collects a LazyFrame or reads the clock, so
the same input gives the same bytes. `run.py` builds the Report from a timeline.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.baseline import BaselineOutcome
from analyzer.detection import Detector
from analyzer.findings import EVIDENCE_COLUMNS, FINDINGS_SCHEMA, Severity, validate_findings

if TYPE_CHECKING:
    from analyzer.inputs import InputReport

__all__ = [
    "FORMATS",
    "InputSummary",
    "Report",
    "at_or_above",
    "finding_records",
    "iso_ts",
    "summary_counts",
]

FORMATS: Final = ("table", "json", "junit", "sarif")

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class InputSummary:
    """What reading one input gave: its path as given, records read and skipped, warnings."""

    path: str
    records: int
    skipped: int
    warnings: tuple[str, ...] = ()

    @classmethod
    def each(cls, inputs: Iterable[InputReport]) -> tuple[InputSummary, ...]:
        """The summaries of what the readers reported, input by input."""
        return tuple(
            cls(
                path=str(item.path),
                records=int(item.records),
                skipped=int(item.skipped),
                warnings=tuple(str(w) for w in item.warnings),
            )
            for item in inputs
        )


@dataclass(frozen=True)
class Report:
    """Everything a report writer needs, collected."""

    #: findings in report order (`analyzer.findings.finish_findings`)
    findings: pl.DataFrame
    #: the detectors that ran, in id order (JUnit test cases, SARIF rules)
    detectors: tuple[Detector, ...]
    inputs: tuple[InputSummary, ...] = ()
    sessions: int = 0
    streams: int = 0
    resumptions: int = 0
    tool_calls: int = 0
    #: findings at or above this fail the run; None for `--fail-on none`
    fail_on: Severity | None = Severity.MEDIUM
    #: flow id -> index into `inputs` of the input that holds it (SARIF locations)
    flow_inputs: Mapping[str, int] = field(default_factory=dict)
    #: flow id -> (index into `inputs`, capture file path, 1-based line of its request record)
    flow_lines: Mapping[str, tuple[int, str, int]] = field(default_factory=dict)
    #: the findings split by `--baseline`; None without one
    baseline: BaselineOutcome | None = None
    #: session key -> `scheme://host:port` of its server, where the analysis reaches several
    #: origins (a forward proxy's capture: `analyzer.timeline.keys`); empty otherwise
    origins: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_findings(self.findings)

    @property
    def new_findings(self) -> pl.DataFrame:
        """The findings that can fail the run: all of them, less those in the baseline."""
        return self.findings if self.baseline is None else self.baseline.new

    def is_baselined(self, fingerprint: str) -> bool:
        """Whether the baseline accepted the finding with this fingerprint."""
        return self.baseline is not None and fingerprint in self.baseline.accepted

    def with_baseline(self, outcome: BaselineOutcome) -> Report:
        """This report with its findings split by a baseline."""
        return dataclasses.replace(self, baseline=outcome)

    def counts_by_severity(self) -> dict[Severity, int]:
        """Findings per severity, every level present, worst first."""
        counts = dict.fromkeys(sorted(Severity, reverse=True), 0)
        for value in self.findings["severity"].to_list():
            counts[Severity(value)] += 1
        return counts

    def sessions_by_origin(self) -> dict[str, int]:
        """Sessions per origin, in origin order (empty where the analysis reaches one)."""
        counts: dict[str, int] = {}
        for origin in self.origins.values():
            counts[origin] = counts.get(origin, 0) + 1
        return dict(sorted(counts.items()))

    def finding_origin(self, session: object) -> str | None:
        """The origin of a finding's session (None without one, or where there is one origin)."""
        return self.origins.get(session) if isinstance(session, str) else None

    def counts_by_detector(self) -> dict[str, int]:
        """Findings per detector id, every detector that ran present, in id order."""
        counts = dict.fromkeys(sorted(det.id for det in self.detectors), 0)
        for value in self.findings["detector"].to_list():
            counts[value] = counts.get(value, 0) + 1
        return dict(sorted(counts.items()))


def at_or_above(findings: pl.DataFrame, fail_on: Severity | None) -> pl.DataFrame:
    """The findings that fail a run with `--fail-on fail_on` (none for None)."""
    if fail_on is None:
        return findings.clear()
    return findings.filter(pl.col("severity") >= fail_on.value)


def iso_ts(ns: int | None) -> str | None:
    """ISO 8601 UTC text of ns since the epoch, with all nine fractional digits."""
    if ns is None:
        return None
    seconds, frac = divmod(ns, 10**9)
    stamp = _EPOCH + dt.timedelta(seconds=seconds)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"


def finding_records(findings: pl.DataFrame) -> list[dict[str, object]]:
    """Findings as plain JSON values in schema order: severities as names, times as ISO text."""
    frame = findings.with_columns(
        pl.col("severity").cast(pl.String),
        pl.col("first_ts", "last_ts").dt.epoch("ns"),
    )
    records: list[dict[str, object]] = []
    for row in frame.iter_rows(named=True):
        record: dict[str, object] = {}
        for name in FINDINGS_SCHEMA:
            value = row[name]
            if name in ("first_ts", "last_ts"):
                value = iso_ts(value)
            elif name in EVIDENCE_COLUMNS:
                value = list(value)
            record[name] = value
        records.append(record)
    return records


def summary_counts(report: Report) -> Sequence[tuple[str, int]]:
    """The timeline counts of the JSON summary, in its order."""
    return (
        ("sessions", report.sessions),
        ("streams", report.streams),
        ("resumptions", report.resumptions),
        ("tool_calls", report.tool_calls),
    )
