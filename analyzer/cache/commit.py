"""How anything enters the cache: written to a `.tmp-` folder, synced, renamed into place.

A reader never sees half an entry or half a set of timeline frames: the folder appears whole,
under its final name, with its manifest written last; `fsync` of every file and of the folder
before the rename keeps that true across a crash (a rename may reach the disk before the data
it names). Staging folders left by analyses that died long ago are removed by `sweep`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Final

__all__ = ["Staging", "discard", "sweep"]

STALE_TMP_S: Final = 3600
TMP_PREFIX: Final = ".tmp-"


class Staging:
    """A `.tmp-` folder in `root` to write files into, then `publish` under a final name."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def start(root: Path, prefix: str = "") -> Staging:
        """A new staging folder in `root` (OSError when it cannot be made)."""
        return Staging(Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{prefix}", dir=root)))

    def seal(self, name: str, manifest: dict[str, Any], *, indent: int | None = None) -> None:
        """Write the manifest (last, 0600) and sync every file of the folder and the folder."""
        target = self.path / name
        target.write_text(json.dumps(manifest, indent=indent, sort_keys=True), "utf-8")
        os.chmod(target, 0o600)
        for child in sorted(self.path.iterdir()):
            if child.is_file() and not child.is_symlink():
                _sync(child, os.O_RDONLY)
        _sync(self.path, os.O_RDONLY | os.O_DIRECTORY)

    def publish(self, final: Path) -> None:
        """Rename the sealed folder to `final` (OSError when taken, or the rename fails)."""
        os.rename(self.path, final)
        with contextlib.suppress(OSError):
            _sync(final.parent, os.O_RDONLY | os.O_DIRECTORY)
        self.path = final

    def abandon(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _sync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def discard(path: Path) -> None:
    """Remove a file, a link or a folder (best effort)."""
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def sweep(root: Path) -> None:
    """Remove the `.tmp-` folders left in `root` by analyses that died long ago (entries and
    timeline sets are staged in such folders, damaged entries set aside as such)."""
    now = time.time()
    for child in root.iterdir():
        if not child.name.startswith(TMP_PREFIX):
            continue
        try:
            if now - child.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(child, ignore_errors=True)
        except OSError:
            continue
