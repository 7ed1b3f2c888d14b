"""analyzer.analysis: inputs read through the cache, the timeline built once, then read back."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from analyzer.analysis import LiveTimeline, load_timeline, raw_tables, read_timeline
from analyzer.command import UsageError
from analyzer.ingest import read_inputs
from analyzer.ingest.tail import CaptureTail

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


def test_the_live_timeline_is_built_from_the_tail_once_per_version(capture: Path) -> None:
    live = LiveTimeline(CaptureTail(capture))
    live.tail.poll()
    built = live.timeline()
    full = read_timeline([capture], cache=False)
    assert built.sessions.collect().equals(full.sessions.collect())
    assert live.tail.poll().changed is False
    assert live.timeline() is built  # no poll changed the tables: not built again
    live.tail.close()  # bumps the version: what it shows now (nothing) is not what it showed
    assert live.timeline() is not built
    assert live.timeline().sessions.collect().height == 0


def test_a_live_timeline_holds_the_tail_folder_until_it_is_gone(capture: Path) -> None:
    live = LiveTimeline(CaptureTail(capture))
    live.tail.poll()
    held = live.timeline()
    folder = live.tail.folder
    assert folder is not None
    live.close()
    assert live.tail.folder is None
    assert folder.exists()  # `held` still scans its parts
    assert held.sessions.collect().height > 0
    del held
    gc.collect()
    assert not folder.exists()
