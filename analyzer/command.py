"""What the `seamwatch` subcommands share: exit codes, the usage error, folder checks.

Below both the CLI (`analyzer.cli`, which parses and dispatches) and the commands it runs
(`analyzer.cli.analyze`, `analyzer.otlp.command`, the dashboard's launch), so none imports the
CLI back.
"""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from analyzer import UserError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(UserError):
    """Bad usage or unreadable input: exit 2 with a one-line reason."""


def is_loopback(address: str) -> bool:
    """True for `localhost` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost: may resolve anywhere


def one_line(error: BaseException) -> str:
    """An exception's message on one line, for exit 2."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def parse_ids(text: str | None) -> list[str] | None:
    """Comma-separated detector ids of `--only` / `--disable`; None when the option is absent."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def writable_by_others(folder: Path) -> bool:
    """Whether users other than the owner may create or replace files in `folder` (group or
    world write, without the sticky bit that would keep them to their own files)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & 0o022) and not mode & stat.S_ISVTX
