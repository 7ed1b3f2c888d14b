"""A real small filesystem for full-disk tests: a tmpfs mounted for the test, then unmounted."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (made if missing); skips the test when this
    process may not mount one (not root, or no mount namespace rights)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or 'mount failed'}")
    try:
        yield where
    finally:
        # Lazy: a process the test started may still hold a file open there.
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill(disk: Path, name: str = "filler") -> Path:
    """Write zeros to `disk/name` until the filesystem refuses more (ENOSPC); the file."""
    path = disk / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    block = bytes(4096)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    return path
                block = block[: len(block) // 2]  # fill the last page's tail too
    finally:
        os.close(fd)
