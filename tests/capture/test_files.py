"""Tests for analyzer.capture.files: the capture folder made as the writer makes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.capture.files import CaptureError, prepare_capture_dir


def test_prepare_capture_dir_fails_as_the_writer_would_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(CaptureError, match=r"^not a directory: .*file$"):
        prepare_capture_dir(tmp_path / "file")
    with pytest.raises(CaptureError, match=r"^not a directory: .*file$"):
        prepare_capture_dir(tmp_path / "file" / "cap")
    ok = tmp_path / "a" / "cap"
    prepare_capture_dir(ok)
    assert ok.is_dir() and list(ok.iterdir()) == []  # the probe file is gone
