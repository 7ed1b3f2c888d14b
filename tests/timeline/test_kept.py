"""analyzer.timeline.kept: one spill policy for frames built now and frames read back."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analyzer.timeline.kept import Kept

ROWS = pl.DataFrame({"stream_id": ["a", "b", "c"], "incarnation": [0, 1, 2]})


class Recorder:
    """A store that keeps what it is given (as `analyzer.cache.FrameWriter` would)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.got: dict[str, int] = {}

    def put(self, name: str, frame: pl.DataFrame) -> Path | None:
        path = self.folder / f"{name}.parquet"
        frame.write_parquet(path)
        self.got[name] = frame.height
        return path

    def put_file(self, name: str, source: Path, rows: int) -> None:
        self.got[name] = rows


def scanned(frame: pl.LazyFrame) -> bool:
    return "parquet" in frame.explain().lower()


@pytest.mark.parametrize(
    ("name", "threshold", "spills"),
    [
        ("streams", 3, True),  # as many rows as the threshold: spilled
        ("streams", 4, False),  # fewer: in memory
        ("placement", 1, False),  # a `memory` frame: never spilled
        ("resumed_progress", 3, True),  # a `sink` frame: written straight to the folder
        ("resumed_progress", 4, False),  # ... and read back into memory when small
    ],
)
def test_a_frame_spills_by_its_rows_and_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, threshold: int, spills: bool
) -> None:
    monkeypatch.setattr("analyzer.timeline.kept.SPILL_ROWS", threshold)
    (tmp_path / "spill").mkdir()
    (tmp_path / "store").mkdir()
    store = Recorder(tmp_path / "store")
    kept = Kept(tmp_path / "spill", store).keep(name, ROWS.lazy())
    assert scanned(kept) == spills
    assert kept.collect().equals(ROWS)
    assert store.got == {name: 3}


def test_without_a_folder_nothing_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("analyzer.timeline.kept.SPILL_ROWS", 1)
    kept = Kept(None)
    for name in ("streams", "resumed_progress"):
        assert not scanned(kept.keep(name, ROWS.lazy()))
    assert set(kept.frames) == {"streams", "resumed_progress"}


def test_an_adopted_file_is_copied_out_or_read_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("analyzer.timeline.kept.SPILL_ROWS", 2)
    stored = tmp_path / "streams.parquet"
    ROWS.write_parquet(stored)
    spill = tmp_path / "spill"
    spill.mkdir()
    kept = Kept(spill)
    large = kept.adopt("streams", stored, 3)
    small = kept.adopt("sessions", stored, 1)
    stored.unlink()  # the set pruned by another analysis: what was taken stays readable
    assert scanned(large) and not scanned(small)
    assert large.collect().equals(ROWS) and small.collect().equals(ROWS)
    assert [p.name for p in spill.iterdir()] == ["stored-streams.parquet"]
    with pytest.raises(KeyError):
        kept.keep("undeclared", ROWS.lazy())
