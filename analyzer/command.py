"""What the `seamwatch` subcommands share: exit codes, the usage error, folder checks.

Below both the CLI (`analyzer.cli`, which parses and dispatches) and the commands it runs
(`analyzer.report.run`, `analyzer.otlp.command`), so neither imports the other back.
"""

from __future__ import annotations

import stat
from pathlib import Path

from analyzer import SeamwatchError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(SeamwatchError):
    """Bad usage or unreadable input: exit 2 with a one-line reason."""


def writable_by_others(folder: Path) -> bool:
    """Whether users other than the owner may create or replace files in `folder` (group or
    world write, without the sticky bit that would keep them to their own files)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & 0o022) and not mode & stat.S_ISVTX
