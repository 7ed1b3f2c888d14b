"""analyzer.timeline.stored: the collected timeline frames kept in the cache, read back equal."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.ingest import read_inputs
from analyzer.timeline import Timeline, load_timeline, stored
from tests.support.planted import spoofing_capture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dashboard" / "round-robin-replicas"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A copy of the stored lab capture, without a cache yet."""
    shutil.copytree(FIXTURE / "capture", tmp_path / "capture")
    shutil.rmtree(tmp_path / "capture" / ".seamwatch-cache", ignore_errors=True)
    return tmp_path / "capture"


def frames_of(timeline: Timeline) -> dict[str, pl.DataFrame]:
    named = {**timeline.frames(), "rpc_messages": timeline.rpc_messages}
    return {name: frame.collect() for name, frame in named.items() if name != "payloads"}


# Record-level frames: joins whose row order is not defined (two fresh builds differ too).
UNORDERED = {"sse_events", "messages", "rpc_messages"}


def assert_same(got: Timeline, want: Timeline) -> None:
    got_frames, want_frames = frames_of(got), frames_of(want)
    assert got_frames.keys() == want_frames.keys()
    for name, frame in want_frames.items():
        assert_frame_equal(got_frames[name], frame, check_row_order=name not in UNORDERED)


def the_set(paths: list[Path]) -> Path:
    folder = stored.target(read_inputs(paths).directories)
    assert folder is not None
    return folder


@pytest.mark.parametrize("spill", [False, True])
def test_a_later_analysis_reads_the_stored_frames_equal_to_a_fresh_build(
    capture: Path, tmp_path: Path, spill: bool
) -> None:
    spill_dir = tmp_path / "spill" if spill else None
    if spill_dir is not None:
        spill_dir.mkdir()
    fresh = load_timeline([capture], cache=False)
    first = load_timeline([capture], spill_dir=spill_dir)  # builds and stores
    folder = the_set([capture])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["manifest.json", *(f"{name}.parquet" for name in stored.STORED)]
    )
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
    assert_same(first, fresh)
    assert_same(load_timeline([capture], spill_dir=spill_dir), fresh)


def test_the_stored_frames_are_what_a_later_analysis_reads(capture: Path) -> None:
    load_timeline([capture])
    sessions = the_set([capture]) / "sessions.parquet"
    frame = pl.read_parquet(sessions)
    frame.with_columns(pl.lit("from the store").alias("client_info")).write_parquet(sessions)
    got = load_timeline([capture]).sessions.collect()
    assert got["client_info"].to_list() == ["from the store"] * frame.height


def test_each_set_of_inputs_in_its_order_has_its_own_set(capture: Path, tmp_path: Path) -> None:
    other = spoofing_capture(tmp_path / "other")
    load_timeline([capture])
    sets = {the_set([capture]), the_set([capture, other]), the_set([other, capture])}
    assert len(sets) == 3
    merged = load_timeline([capture, other])
    assert the_set([capture, other]).is_dir()
    assert_same(load_timeline([capture, other]), merged)
    assert_same(merged, load_timeline([capture, other], cache=False))


def test_another_code_key_is_another_set(capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = the_set([capture])
    monkeypatch.setattr(stored, "_code_key", lambda: "changed timeline code")
    assert the_set([capture]) != before


def test_a_damaged_set_is_removed_and_stored_again(capture: Path) -> None:
    fresh = load_timeline([capture], cache=False)
    load_timeline([capture])
    folder = the_set([capture])
    (folder / "streams.parquet").write_bytes(b"not parquet")
    assert_same(load_timeline([capture]), fresh)  # built again, and stored again
    assert stored.read(folder, scan_from=None) is not None
    (folder / "exchanges.parquet").unlink()
    assert_same(load_timeline([capture]), fresh)
    assert (folder / "exchanges.parquet").is_file()


def test_an_entry_keeps_its_latest_sets(capture: Path, tmp_path: Path) -> None:
    others = [spoofing_capture(tmp_path / f"other{n}") for n in range(stored.KEEP + 1)]
    for other in others:
        load_timeline([capture, other])
    entry = the_set([capture]).parent
    kept = {p.name for p in entry.iterdir() if p.name.startswith("timeline-")}
    assert kept == {the_set([capture, other]).name for other in others[1:]}


def test_nothing_is_stored_without_the_cache(capture: Path) -> None:
    load_timeline([capture], cache=False)
    assert not (capture / ".seamwatch-cache").exists()
