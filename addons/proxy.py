"""`seamwatch proxy`: mitmdump in reverse mode with the capture addon loaded."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

CAPTURE_ADDON = Path(__file__).resolve().parent / "seamwatch_capture.py"
# `seamwatch proxy` exits with this when the capture is incomplete (its worker died): like
# `analyze`'s 1 for findings, the run completed and has something to look at; 2 would say the
# command line was wrong.
EXIT_CAPTURE_INCOMPLETE = 1


class _CaptureTrouble(logging.Handler):
    """Prints the capture's warnings and errors on stderr, one seamwatch line each, and counts
    the errors: a capture that logged one is incomplete."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors += 1
        try:
            print(f"seamwatch: {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


def mitmdump_args(
    *,
    upstream: str,
    listen_host: str,
    listen_port: int,
    out: Path,
    replica_header: str | None = None,
    client_header: str | None = None,
    redact: bool = True,
) -> list[str]:
    """The mitmdump options that `seamwatch proxy` runs with; `run` adds the capture addon
    itself. Plain mitmdump wants `-s CAPTURE_ADDON` before them."""
    args = [
        "--mode",
        f"reverse:{upstream}",
        "--listen-host",
        listen_host,
        "--listen-port",
        str(listen_port),
        "--set",
        f"seamwatch_dir={out}",
        "--set",
        f"seamwatch_upstream={upstream}",
        "--set",
        f"seamwatch_redact={'true' if redact else 'false'}",
        # Connect upstream per request, so an unreachable server gets the client a 502
        # (recorded as such) instead of a silently closed connection.
        "--set",
        "connection_strategy=lazy",
        # Print nothing per flow: the capture files are the record.
        "--set",
        "flow_detail=0",
        "--set",
        "termlog_verbosity=warn",
    ]
    if replica_header:
        args += ["--set", f"seamwatch_replica_header={replica_header}"]
    if client_header:
        args += ["--set", f"seamwatch_client_header={client_header}"]
    return args


def run(args: list[str]) -> int:
    """Run mitmdump with the capture addon in this process until SIGINT or SIGTERM; 0, or 1 if
    the capture is incomplete."""
    from mitmproxy.tools import cmdline
    from mitmproxy.tools.dump import DumpMaster
    from mitmproxy.tools.main import run as run_mitmproxy

    from addons.seamwatch_capture import SeamwatchCapture

    class CaptureMaster(DumpMaster):
        """mitmdump with the capture addon added before the options are read: it opens the
        capture while the command line is applied, before the proxy listens. (`-s` loads a
        script after the proxy listens: the first requests would pass unrecorded, and a capture
        that failed to open would end the proxy after it had served them.)"""

        def __init__(self, options: Any) -> None:
            super().__init__(options)
            self.addons.add(SeamwatchCapture())

    # The capture's own messages go to stderr as seamwatch's, not to mitmproxy's log on stdout.
    capture_log = logging.getLogger("analyzer.capture")
    trouble = _CaptureTrouble()
    capture_log.addHandler(trouble)
    propagate, capture_log.propagate = capture_log.propagate, False
    try:
        run_mitmproxy(CaptureMaster, cmdline.mitmdump, args)
    finally:
        capture_log.removeHandler(trouble)
        capture_log.propagate = propagate
    return EXIT_CAPTURE_INCOMPLETE if trouble.errors else 0
