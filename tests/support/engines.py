"""Both engines' results compared: the Spark engine's against the default engine's timeline."""

from __future__ import annotations

from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from analyzer.detectors import run_detectors


def assert_same_results(result: Any, timeline: Any, *, named: bool = True) -> pl.DataFrame:
    """`result` (`spark_findings`) holds the findings, counts and input reports of `timeline`
    (`read_timeline` of the same paths); returns those findings. `named=False`: the reports
    are compared but for the names of the inputs and their files (the same folder read by
    another name, a URI)."""
    expected = run_detectors(timeline)
    assert_frame_equal(result.findings, expected)
    heights = {
        name: getattr(timeline, name).select(pl.len()).collect().item()
        for name in ("sessions", "streams", "resumptions", "tool_calls")
    }
    assert result.counts == heights

    # What the report shows of each input (`cached` says which engine parsed first).
    def shown(report: Any) -> Any:
        return (
            report.as_json() if named else {**report.as_json(), "path": "", "counts": report.counts}
        )

    assert [shown(r) for r in result.inputs] == [shown(r) for r in timeline.inputs]
    return expected
