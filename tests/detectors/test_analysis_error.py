"""analysis-error: the finding the runner writes for a failed detector."""

from __future__ import annotations

from types import SimpleNamespace

from analyzer.detectors import analysis_error
from analyzer.findings import FINDINGS_SCHEMA, fingerprint


def test_finding_names_the_detector_and_the_exception() -> None:
    got = analysis_error.finding("causal-gap", KeyError("stream_pos"))
    assert got.schema == FINDINGS_SCHEMA
    row = got.row(0, named=True)
    assert row["detector"] == "analysis-error"
    assert row["severity"] == "high"
    assert row["title"] == "detector causal-gap failed: KeyError"
    assert "causal-gap raised KeyError: 'stream_pos'" in row["detail"]
    assert row["fingerprint"] == fingerprint(
        "analysis-error", None, extra=["causal-gap", "KeyError"]
    )


def test_an_exception_without_a_message() -> None:
    row = analysis_error.finding("causal-gap", RuntimeError()).row(0, named=True)
    assert "RuntimeError: (no message)" in row["detail"]


def test_detect_finds_nothing_itself() -> None:
    assert analysis_error.detect(SimpleNamespace()).collect().height == 0
