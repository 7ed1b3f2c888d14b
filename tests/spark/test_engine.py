"""Starting the Spark engine (analyzer/spark/engine.py); its results: tests/spark/test_init.py."""

from __future__ import annotations

import pytest

from analyzer.ingest import InputReport
from analyzer.spark import engine


def test_without_java_it_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(engine.SparkUnavailable, match="needs Java 17"):
        engine.session()


def test_repeated_flows_are_counted_in_the_input_report() -> None:
    report = InputReport("a", "capture", 10, 0, {"seq_gap": 1}, ("w",))
    counted = engine.with_repeats(report, 3)
    assert counted.counts == {"seq_gap": 1, "duplicate_flow": 3}
    assert len(counted.warnings) == 2
    assert engine.with_repeats(report, 0) is report
