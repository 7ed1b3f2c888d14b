"""analyzer/command.py: what the subcommands share."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer import SeamwatchError
from analyzer.command import UsageError, parse_ids, writable_by_others


def test_a_usage_error_is_a_seamwatch_error() -> None:
    assert issubclass(UsageError, SeamwatchError)


@pytest.mark.parametrize(
    ("mode", "open_to_others"),
    [(0o700, False), (0o750, False), (0o770, True), (0o757, True), (0o1777, False)],
)
def test_writable_by_others(tmp_path: Path, mode: int, open_to_others: bool) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    folder.chmod(mode)
    assert writable_by_others(folder) is open_to_others


def test_a_missing_folder_or_a_file_is_not_writable_by_others(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    file.chmod(0o666)
    assert not writable_by_others(tmp_path / "absent")
    assert not writable_by_others(file)


def test_parse_ids() -> None:
    assert parse_ids(None) is None
    assert parse_ids("causal-gap, stale-cursor,,") == ["causal-gap", "stale-cursor"]
    assert parse_ids("") == []
