"""analyzer.cache.frames: the collected timeline frames kept in the cache, read back equal."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import raw_tables, read_timeline
from analyzer.cache.frames import KEEP, frame_set, read_frames
from analyzer.ingest import read_inputs
from analyzer.timeline import Timeline, assemble
from analyzer.timeline.frames import FRAMES, STORED
from analyzer.timeline.kept import Kept
from tests.support.planted import spoofing_capture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dashboard" / "round-robin-replicas"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A copy of the stored lab capture, without a cache yet."""
    shutil.copytree(FIXTURE / "capture", tmp_path / "capture")
    shutil.rmtree(tmp_path / "capture" / ".seamwatch-cache", ignore_errors=True)
    return tmp_path / "capture"


def frames_of(timeline: Timeline) -> dict[str, pl.DataFrame]:
    """Every frame of the Timeline but the payload texts (scans of the cache entry as they are)."""
    names = [f.name for f in FRAMES if f.on_timeline and f.name != "payloads"]
    return {name: getattr(timeline, name).collect() for name in names}


def read_back(folder: Path, spill_dir: Path | None = None) -> dict[str, pl.LazyFrame] | None:
    """The stored frames of a set as an analysis takes them (None: no sound set)."""
    kept = Kept(spill_dir)
    return kept.frames if read_frames(folder, STORED, kept.adopt) else None


# Record-level frames: joins whose row order is not defined (two fresh builds differ too).
UNORDERED = {
    "sse_events",
    "messages",
    "rpc_messages",
    "recurring_events",
    "resumed_events",
    "replay_messages",
    "id_counters",
    "resumes_at_cursor",
    "after_cursor",
}


def assert_same(got: Timeline, want: Timeline) -> None:
    got_frames, want_frames = frames_of(got), frames_of(want)
    assert got_frames.keys() == want_frames.keys()
    for name, frame in want_frames.items():
        assert_frame_equal(got_frames[name], frame, check_row_order=name not in UNORDERED)


def the_set(paths: list[Path]) -> Path:
    folder = frame_set(read_inputs(paths).directories)
    assert folder is not None
    return folder


@pytest.mark.parametrize("spill", [False, True])
def test_a_later_analysis_reads_the_stored_frames_equal_to_a_fresh_build(
    capture: Path, tmp_path: Path, spill: bool
) -> None:
    spill_dir = tmp_path / "spill" if spill else None
    if spill_dir is not None:
        spill_dir.mkdir()
    fresh = read_timeline([capture], cache=False)
    first = read_timeline([capture], spill_dir=spill_dir)  # builds and stores
    folder = the_set([capture])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["manifest.json", *(f"{name}.parquet" for name in STORED)]
    )
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
    assert_same(first, fresh)
    assert_same(read_timeline([capture], spill_dir=spill_dir), fresh)


def test_the_build_is_announced_and_reading_the_stored_frames_is_not(capture: Path) -> None:
    steps: list[str] = []
    read_timeline([capture], on_step=steps.append)  # builds and stores
    assert steps == ["building the timeline"]
    read_timeline([capture], on_step=steps.append)  # reads what the first stored
    assert steps == ["building the timeline"]
    read_timeline([capture], cache=False, on_step=steps.append)
    assert steps == ["building the timeline"] * 2


def test_the_stored_frames_are_what_a_later_analysis_reads(capture: Path) -> None:
    read_timeline([capture])
    folder = the_set([capture])
    sessions = folder / "sessions.parquet"
    frame = pl.read_parquet(sessions)
    frame.with_columns(pl.lit("from the store").alias("client_info")).write_parquet(sessions)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    manifest["sha256"]["sessions"] = hashlib.sha256(sessions.read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    got = read_timeline([capture]).sessions.collect()
    assert got["client_info"].to_list() == ["from the store"] * frame.height


def test_each_set_of_inputs_in_its_order_has_its_own_set(capture: Path, tmp_path: Path) -> None:
    other = spoofing_capture(tmp_path / "other")
    read_timeline([capture])
    sets = {the_set([capture]), the_set([capture, other]), the_set([other, capture])}
    assert len(sets) == 3
    merged = read_timeline([capture, other])
    assert the_set([capture, other]).is_dir()
    assert_same(read_timeline([capture, other]), merged)
    assert_same(merged, read_timeline([capture, other], cache=False))


def test_another_code_key_is_another_set(capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = the_set([capture])
    monkeypatch.setattr("analyzer.cache.frames._code_key", lambda: "changed timeline code")
    assert the_set([capture]) != before


def test_a_damaged_set_is_removed_and_stored_again(capture: Path) -> None:
    fresh = read_timeline([capture], cache=False)
    read_timeline([capture])
    folder = the_set([capture])
    (folder / "streams.parquet").write_bytes(b"not parquet")
    assert_same(read_timeline([capture]), fresh)  # built again, and stored again
    assert read_back(folder) is not None
    (folder / "exchanges.parquet").unlink()
    assert_same(read_timeline([capture]), fresh)
    assert (folder / "exchanges.parquet").is_file()


def test_an_entry_keeps_its_latest_sets(capture: Path, tmp_path: Path) -> None:
    others = [spoofing_capture(tmp_path / f"other{n}") for n in range(KEEP + 1)]
    for other in others:
        read_timeline([capture, other])
    entry = the_set([capture]).parent
    kept = {p.name for p in entry.iterdir() if p.name.startswith("timeline-")}
    assert kept == {the_set([capture, other]).name for other in others[1:]}


def test_nothing_is_stored_without_the_cache(capture: Path) -> None:
    read_timeline([capture], cache=False)
    assert not (capture / ".seamwatch-cache").exists()


def test_a_set_pruned_while_an_analysis_reads_it_does_not_disturb_that_analysis(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = read_timeline([capture], cache=False)
    read_timeline([capture])
    spill = tmp_path / "spill"
    spill.mkdir()
    # A threshold of 1 row: every frame but those held in memory is scanned, as large ones are.
    folder = the_set([capture])
    monkeypatch.setattr("analyzer.timeline.kept.SPILL_ROWS", 1)
    reading = read_back(folder, spill)
    assert reading is not None
    assert "parquet" in reading["streams"].explain().lower()
    shutil.rmtree(folder)  # another analysis pruned it
    raw = raw_tables(read_inputs([capture]))
    assert_same(assemble(raw, fresh.inputs, reading), fresh)


def test_a_set_damaged_in_place_is_found_by_its_digest(capture: Path) -> None:
    fresh = read_timeline([capture], cache=False)
    read_timeline([capture])
    path = the_set([capture]) / "exchanges.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    path.write_bytes(bytes(data))
    assert_same(read_timeline([capture]), fresh)
    assert read_back(the_set([capture])) is not None


@pytest.mark.parametrize("what", ["no manifest", "a file", "a symlink"])
def test_a_set_that_is_not_what_a_writer_makes_is_replaced(
    capture: Path, tmp_path: Path, what: str
) -> None:
    fresh = read_timeline([capture], cache=False)
    read_timeline([capture])
    folder = the_set([capture])
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(folder, elsewhere)
    if what == "no manifest":
        (folder / "manifest.json").unlink()
    else:
        shutil.rmtree(folder)
        if what == "a file":
            folder.write_text("x")
        else:
            folder.symlink_to(elsewhere)  # a sound set, but outside the cache
    assert read_back(folder) is None
    assert_same(read_timeline([capture]), fresh)
    assert folder.is_dir() and not folder.is_symlink()
    assert (elsewhere / "manifest.json").is_file()  # a symlink's target is left alone


def test_a_new_set_survives_the_pruning_whatever_the_clock(capture: Path, tmp_path: Path) -> None:
    others = [spoofing_capture(tmp_path / f"other{n}") for n in range(KEEP)]
    for other in others:
        read_timeline([capture, other])
    entry = the_set([capture]).parent
    later = time.time() + 600  # sets used "in the future": a clock stepped back since
    for child in entry.glob("timeline-*"):
        os.utime(child, (later, later))
    read_timeline([capture])
    assert the_set([capture]).is_dir()
    assert len(list(entry.glob("timeline-*"))) == KEEP


def test_no_room_to_store_changes_nothing_else(capture: Path, tmp_path: Path) -> None:
    """A file-size limit makes every write of the set fail, as a full disk would."""
    fresh = tmp_path / "fresh.json"
    analyze = ["analyze", "--format", "json", "--fail-on", "none"]
    cli = [sys.executable, "-m", "analyzer.cli", *analyze]
    subprocess.run([*cli, "--no-cache", "--out", str(fresh), str(capture)], check=True)
    subprocess.run([*cli, "--out", str(tmp_path / "first.json"), str(capture)], check=True)
    entry = the_set([capture]).parent
    shutil.rmtree(the_set([capture]))
    limited = (
        "import resource, signal, sys; from analyzer.cli import main; "
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY)); "
        "sys.exit(main(sys.argv[1:]))"
    )
    run = [sys.executable, "-c", limited, *analyze, str(capture)]
    out = subprocess.run(run, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == fresh.read_text("utf-8")
    assert not list(entry.glob("*timeline-*"))  # neither a set nor a staging folder


def test_nothing_is_stored_for_inputs_not_all_in_the_cache(capture: Path, tmp_path: Path) -> None:
    other = spoofing_capture(tmp_path / "other")
    (other / ".seamwatch-cache").symlink_to(tmp_path)  # not a private folder: not used
    read_timeline([capture, other])
    entry = the_set([capture]).parent
    assert not list(entry.glob("timeline-*"))
