"""seamwatch: find where MCP Streamable HTTP streams break and resume badly."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("seamwatch")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"


class SeamwatchError(Exception):
    """Root of every error the analyzer raises on purpose."""


class UserError(SeamwatchError):
    """An error the user caused (bad usage, an unreadable input, a config or baseline that
    cannot be used, a report target that cannot be written): the CLI says it in one line and
    exits 2, never with a traceback."""
