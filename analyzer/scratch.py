"""Private scratch folders in the system's temporary directory, and the sweep of stale ones.

An analysis keeps large frames in a scratch folder while it runs, the Live page keeps the rows it
read there, an uncached input its tables: each removes its folder when done, but a process that
is killed (SIGKILL, out of memory) cannot. Folders are named `seamwatch-<kind>-<pid>-…`, so the
next one of a kind removes those whose process is gone and that nothing wrote to for an hour
(the age guards against a process of the same user whose pid this one cannot see, in another
PID namespace sharing the temporary directory).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Final

__all__ = ["process_alive", "scratch_prefix", "sweep"]

STALE_S: Final = 3600


def scratch_prefix(kind: str) -> str:
    """The name prefix of a new scratch folder of `kind` (for `tempfile.mkdtemp` and
    `TemporaryDirectory`, mode 0700), after removing the stale folders of that kind."""
    sweep(kind)
    return f"seamwatch-{kind}-{os.getpid()}-"


def sweep(kind: str, *, now: float | None = None) -> list[Path]:
    """Remove this user's `seamwatch-<kind>-<pid>-…` folders whose process is gone and that
    were not modified for `STALE_S`; return them."""
    base = Path(tempfile.gettempdir())
    head = f"seamwatch-{kind}-"
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        children = list(base.glob(head + "*"))
    except OSError:
        return removed
    for child in children:
        pid = child.name[len(head) :].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            info = child.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if now - info.st_mtime < STALE_S or process_alive(int(pid)):
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process `pid` exists (one this process may not signal counts as alive; a
    zombie too: reap a child before asking)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or no pid at all: leave its folder be
    return True
