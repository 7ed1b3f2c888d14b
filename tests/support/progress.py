"""The progress a dump or HAR reader reports (`analyzer.ingest.common.HalfMeter`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def read_with_progress(read: Callable[..., object], path: Path, out: Path) -> list[tuple[int, int]]:
    """Read `path` into a new folder `out`; the (done, total) calls the reader made."""
    calls: list[tuple[int, int]] = []
    out.mkdir()
    read(path, out, progress=lambda done, total: calls.append((done, total)))
    return calls


def assert_half_then_whole(calls: list[tuple[int, int]], size: int) -> None:
    """Loading the input filled the first half of the bar, converting it the second; the bar
    never went back."""
    assert calls[0] == (size // 2, size)
    assert calls[-1] == (size, size)
    assert all(total == size for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
