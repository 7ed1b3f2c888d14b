"""A detector failed on this input: its findings are missing from this report.

The runner writes these findings, not a detection: when a detector raises (or returns a frame
that is not findings), its exception becomes one high finding, so CI notices, and the other
detectors still run. What to change: report the exception with the capture that caused it;
until it is fixed, `--disable` the failing detector to keep CI useful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detectors import ANALYSIS_ERROR, Detector
from analyzer.findings import Severity, empty_findings, findings_frame

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def detect(timeline: Timeline) -> pl.LazyFrame:
    """No findings of its own: the runner calls `finding` for each detector that fails."""
    return empty_findings().lazy()


def finding(detector_id: str, error: BaseException) -> pl.DataFrame:
    """The one finding reporting that `detector_id` raised `error`."""
    kind = type(error).__name__
    message = str(error).strip() or "(no message)"
    return findings_frame(
        [
            {
                "detector": ANALYSIS_ERROR,
                "severity": Severity.HIGH,
                "title": f"detector {detector_id} failed: {kind}",
                "detail": (
                    f"{detector_id} raised {kind}: {message}\n"
                    f"Its findings are missing from this report; the other detectors ran."
                ),
                # Distinct per failing detector and error kind; the message may hold paths.
                "fingerprint_extra": [detector_id, kind],
            }
        ]
    )


DETECTOR: Final[Detector] = Detector(
    id=ANALYSIS_ERROR, severity=Severity.HIGH, description=__doc__ or "", detect=detect
)
