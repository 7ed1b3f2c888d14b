"""Tests for analyzer.capture.retention: which files go, what is said of them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from analyzer.capture.retention import Retention, expired, prune
from analyzer.record_models import RetentionDeleted, RetentionPolicy


def capture_file(
    folder: Path, run: str, index: int, seqs: range, *, age_s: float = 0, partial: bool = False
) -> Path:
    """A capture file of `run` holding records `seqs` (the first its capture_open), aged."""
    name = f"capture-{run}-{index:04d}.jsonl" + (".partial" if partial else "")
    lines = [
        {"seq": seqs[0], "kind": "capture_open", "run_id": run, "file_index": index},
        *({"seq": seq, "kind": "stream_end", "flow": "f", "how": "complete"} for seq in seqs[1:]),
    ]
    path = folder / name
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Run a's files 0-2 (oldest first), its open file 3, and a file of another run."""
    capture_file(tmp_path, "a", 0, range(0, 10), age_s=400)
    capture_file(tmp_path, "a", 1, range(10, 20), age_s=300)
    capture_file(tmp_path, "a", 2, range(20, 30), age_s=200)
    capture_file(tmp_path, "a", 3, range(30, 40), age_s=0, partial=True)
    capture_file(tmp_path, "b", 0, range(0, 5), age_s=250)
    return tmp_path


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def total(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def test_size_deletes_the_oldest_closed_files_until_the_folder_fits(folder: Path) -> None:
    size_a0 = (folder / "capture-a-0000.jsonl").stat().st_size
    size_a1 = (folder / "capture-a-0001.jsonl").stat().st_size
    bound = total(folder) - size_a0 - size_a1 + 1  # room only after two deletions
    deleted = prune(folder, Retention(max_bytes=bound))
    assert [d.file for d in deleted] == ["capture-a-0000.jsonl", "capture-a-0001.jsonl"]
    assert [(d.run_id, d.file_index, d.first_seq, d.last_seq) for d in deleted] == [
        ("a", 0, 0, 9),
        ("a", 1, 10, 19),
    ]
    assert {d.reason for d in deleted} == {"max_bytes"}
    assert "capture-a-0003.jsonl.partial" in names(folder)
    assert total(folder) <= bound


def test_room_for_the_next_file_counts_against_the_bound(folder: Path) -> None:
    bound = total(folder)
    assert prune(folder, Retention(max_bytes=bound)) == []  # within bounds: nothing goes
    assert [d.file for d in prune(folder, Retention(max_bytes=bound), room=1)] == [
        "capture-a-0000.jsonl"
    ]


def test_an_open_file_is_never_deleted_even_when_it_alone_is_too_big(folder: Path) -> None:
    deleted = prune(folder, Retention(max_bytes=1))
    assert len(deleted) == 4  # every closed file, of both runs
    assert names(folder) == {"capture-a-0003.jsonl.partial"}


def test_age_deletes_closed_files_older_than_the_bound_only(folder: Path) -> None:
    assert expired(folder, 260)
    deleted = prune(folder, Retention(max_age_s=260))
    assert [(d.file, d.reason) for d in deleted] == [
        ("capture-a-0000.jsonl", "max_age"),
        ("capture-a-0001.jsonl", "max_age"),
    ]
    assert not expired(folder, 260)
    assert prune(folder, Retention(max_age_s=260)) == []


def test_no_bounds_delete_nothing(folder: Path) -> None:
    before = names(folder)
    assert prune(folder, Retention()) == []
    assert names(folder) == before


def test_a_file_that_is_not_a_capture_is_described_without_its_seq(tmp_path: Path) -> None:
    (tmp_path / "capture-x-0000.jsonl").write_text("not json\n")
    (deleted,) = prune(tmp_path, Retention(max_bytes=1))
    assert (deleted.run_id, deleted.first_seq, deleted.last_seq) == (None, None, None)


def test_the_last_seq_of_a_file_ending_in_a_long_line_is_found(tmp_path: Path) -> None:
    path = capture_file(tmp_path, "a", 0, range(0, 3))
    with path.open("a") as fh:  # a last record longer than the blocks read back
        fh.write('{"seq":3,"kind":"stream_end","error":"' + "x" * 200_000 + '"}\n')
    (deleted,) = prune(tmp_path, Retention(max_bytes=1))
    assert (deleted.first_seq, deleted.last_seq) == (0, 3)


def test_what_the_writer_records_is_what_the_reader_validates(folder: Path) -> None:
    # The capture side keeps its own plain record (no pydantic in the proxy's worker); the
    # reader's model (schema 1.3) must accept it field for field, and reject a field it lacks.
    retention = Retention(max_bytes=1, max_age_s=60)
    deleted = prune(folder, retention)
    policy = {**retention.policy(), "deleted": [d.record() for d in deleted]}
    model = RetentionPolicy.model_validate(policy)
    assert [d.model_dump() for d in model.deleted] == [d.record() for d in deleted]
    with pytest.raises(ValidationError):
        RetentionDeleted.model_validate({**deleted[0].record(), "extra": 1})
