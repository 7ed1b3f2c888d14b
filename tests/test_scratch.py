"""analyzer.scratch: private scratch folders, and the sweep of those a killed process left."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from analyzer import scratch


@pytest.fixture
def tmpdir_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _gone_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _folder(root: Path, name: str, age_s: float) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "part.parquet").write_bytes(b"x")
    then = time.time() - age_s
    os.utime(folder, (then, then))
    return folder


def test_a_dead_process_folder_is_swept_once_stale(tmpdir_root: Path) -> None:
    dead = _gone_pid()
    stale = _folder(tmpdir_root, f"seamwatch-tail-{dead}-abc", scratch.STALE_S + 60)
    fresh = _folder(tmpdir_root, f"seamwatch-tail-{dead}-def", 60)
    mine = _folder(tmpdir_root, f"seamwatch-tail-{os.getpid()}-ghi", scratch.STALE_S + 60)
    other_kind = _folder(tmpdir_root, f"seamwatch-spill-{dead}-jkl", scratch.STALE_S + 60)
    odd = _folder(tmpdir_root, "seamwatch-tail-notapid-x", scratch.STALE_S + 60)

    prefix = scratch.scratch_prefix("tail")

    assert prefix == f"seamwatch-tail-{os.getpid()}-"
    assert not stale.exists()
    # Recently written (its process may be in a PID namespace this one cannot see), this
    # process's own, another kind, and names that are not ours stay.
    assert fresh.exists() and mine.exists() and other_kind.exists() and odd.exists()


def test_a_new_folder_is_private_and_named_for_the_sweep(tmpdir_root: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix=scratch.scratch_prefix("spill")))
    assert folder.parent == tmpdir_root
    assert folder.stat().st_mode & 0o777 == 0o700
    assert scratch.sweep("spill", now=time.time() + 10 * scratch.STALE_S) == []  # alive
