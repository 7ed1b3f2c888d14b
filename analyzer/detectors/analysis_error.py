"""A detector failed on this input: its findings are missing from this report.

The runner writes these findings, not a detection: when a detector raises (or returns a frame
that is not findings), its exception becomes one high finding, so CI notices, and the other
detectors still run. What to change: report the exception with the capture that caused it;
until it is fixed, `--disable` the failing detector to keep CI useful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import ANALYSIS_ERROR, Detector, analysis_error_finding
from analyzer.findings import Severity, empty_findings

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def detect(timeline: Timeline) -> pl.LazyFrame:
    """No findings of its own: the runner calls `finding` for each detector that fails."""
    return empty_findings().lazy()


#: The runner's finding for a detector that raised.
finding = analysis_error_finding


DETECTOR: Final[Detector] = Detector(
    id=ANALYSIS_ERROR, severity=Severity.HIGH, description=__doc__ or "", detect=detect
)
