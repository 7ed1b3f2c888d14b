"""analyzer.analysis: inputs read through the cache, the timeline built once, then read back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analyzer.analysis import load_timeline, raw_tables, read_timeline
from analyzer.command import UsageError
from analyzer.ingest import read_inputs

FIXTURE = Path(__file__).resolve().parent / "fixtures/dashboard/round-robin-replicas/capture"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "capture")
    shutil.rmtree(tmp_path / "capture" / ".seamwatch-cache", ignore_errors=True)
    return tmp_path / "capture"


def test_the_timeline_is_built_once_then_read_from_the_cache(capture: Path) -> None:
    steps: list[str] = []
    first = read_timeline([capture], on_step=steps.append)
    second = read_timeline([capture], on_step=steps.append)
    assert steps == ["building the timeline"]
    assert second.inputs[0].cached
    assert second.sessions.collect().equals(first.sessions.collect())


def test_the_raw_tables_scan_the_entry_and_its_payload_parts(capture: Path) -> None:
    raw = raw_tables(read_inputs([capture]))
    assert raw.payload_rows is not None
    assert raw.flows.collect().height > 0
    assert "input" in raw.flows.collect_schema()


def test_unreadable_input_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        load_timeline(
            [tmp_path / "missing.jsonl"], replica_header=None, client_header=None, use_cache=True
        )
