"""analyzer.cache.commit: staged, sealed, renamed into place; one sweep of what died."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from analyzer.cache.commit import STALE_TMP_S, Staging, discard, sweep


def test_a_sealed_folder_appears_whole_under_its_name(tmp_path: Path) -> None:
    staging = Staging.start(tmp_path, "set-")
    assert staging.path.name.startswith(".tmp-set-")
    (staging.path / "a.parquet").write_bytes(b"rows")
    staging.seal("manifest.json", {"key": "k"})
    final = tmp_path / "entry"
    staging.publish(final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]
    assert json.loads((final / "manifest.json").read_text("utf-8")) == {"key": "k"}
    assert (final / "manifest.json").stat().st_mode & 0o777 == 0o600


def test_publishing_onto_a_taken_name_fails_and_abandon_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "entry").mkdir()
    (tmp_path / "entry" / "theirs").write_text("x", "utf-8")
    staging = Staging.start(tmp_path)
    (staging.path / "mine").write_text("y", "utf-8")
    staging.seal("manifest.json", {})
    with pytest.raises(OSError):
        staging.publish(tmp_path / "entry")
    staging.abandon()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]
    assert [p.name for p in (tmp_path / "entry").iterdir()] == ["theirs"]


def test_sweep_removes_only_staging_folders_that_died_long_ago(tmp_path: Path) -> None:
    old, new = Staging.start(tmp_path), Staging.start(tmp_path)
    (tmp_path / "entry").mkdir()
    long_ago = time.time() - STALE_TMP_S - 60
    os.utime(old.path, (long_ago, long_ago))
    os.utime(tmp_path / "entry", (long_ago, long_ago))
    sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["entry", new.path.name])


def test_discard_removes_a_folder_a_file_or_a_link(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x", "utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    for name in ("link", "folder", "file", "missing"):
        discard(tmp_path / name)
    assert list(tmp_path.iterdir()) == []
