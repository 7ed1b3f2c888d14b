"""`seamwatch proxy`: mitmdump in reverse mode with the capture addon loaded."""

from __future__ import annotations

import logging
import ssl
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Tls:
    """TLS both ways: how the origin is verified, and the certificate clients are served."""

    upstream_ca: Path | None = None  # PEM of the CA(s) that signed the origin's certificate
    upstream_insecure: bool = False  # verify nothing (said on stderr by the CLI)
    cert: Path | None = None  # PEM with key: served to clients instead of mitmproxy's own
    ca_dir: Path | None = None  # mitmproxy's confdir: its CA, which `--mode regular` needs


@dataclass(frozen=True)
class Daemon:
    """What a long-running capture needs: retention, stats, metrics."""

    max_bytes: int | None = None
    max_age_s: int | None = None
    rotate_bytes: int | None = None
    stats_interval_s: int | None = None  # None: no stats line; 0: at exit only
    metrics: tuple[str, int] | None = None


def system_trust() -> str | None:
    """The system's CA bundle file, for verifying origins; None when there is none (then
    mitmproxy falls back to certifi's bundle)."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def mitmdump_args(
    *,
    upstream: str | None,
    listen_host: str,
    listen_port: int,
    out: Path,
    replica_header: str | None = None,
    client_header: str | None = None,
    redact: bool = True,
    mode: str = "reverse",
    tls: Tls | None = None,
    daemon: Daemon | None = None,
) -> list[str]:
    """The mitmdump options that `seamwatch proxy` runs with; `run` adds the capture addon
    itself. Plain mitmdump wants `-s CAPTURE_ADDON` before them.

    `mode`: "reverse" in front of `upstream`, "regular" (a forward proxy: clients use
    HTTPS_PROXY and trust the CA in `tls.ca_dir`), or "upstream:URL" (a forward proxy that
    chains to the proxy at URL). Every option goes through `--set`: mitmproxy applies the
    `--set`s in one update, so the capture, which opens in that update, records the listen
    address and mode that apply (a flag such as `--listen-port` would apply after it).
    """
    tls = tls or Tls()
    daemon = daemon or Daemon()
    spec = f"reverse:{upstream}" if mode == "reverse" else mode
    recorded_upstream = upstream if mode == "reverse" else mode.partition(":")[2] or None
    sets = [
        f"mode={spec}",
        f"listen_host={listen_host}",
        f"listen_port={listen_port}",
        f"seamwatch_dir={out}",
        f"seamwatch_upstream={recorded_upstream or ''}",
        f"seamwatch_redact={'true' if redact else 'false'}",
        # Connect upstream per request, so an unreachable server gets the client a 502
        # (recorded as such) instead of a silently closed connection.
        "connection_strategy=lazy",
        # Print nothing per flow: the capture files are the record.
        "flow_detail=0",
        "termlog_verbosity=warn",
    ]
    if tls.upstream_insecure:
        sets.append("ssl_insecure=true")
    elif tls.upstream_ca is not None:
        sets.append(f"ssl_verify_upstream_trusted_ca={tls.upstream_ca}")
    else:
        trust = system_trust()
        if trust is not None:
            sets.append(f"ssl_verify_upstream_trusted_ca={trust}")
    if tls.cert is not None:
        sets.append(f"certs=*={tls.cert}")
    if tls.ca_dir is not None:
        sets.append(f"confdir={tls.ca_dir}")
    if daemon.max_bytes:
        sets.append(f"seamwatch_max_bytes={daemon.max_bytes}")
    if daemon.max_age_s:
        sets.append(f"seamwatch_max_age_s={daemon.max_age_s}")
    if daemon.rotate_bytes:
        sets.append(f"seamwatch_rotate_bytes={daemon.rotate_bytes}")
    if daemon.stats_interval_s is not None:
        sets.append(f"seamwatch_stats_interval_s={daemon.stats_interval_s}")
    if daemon.metrics is not None:
        host, port = daemon.metrics
        shown = f"[{host}]" if ":" in host else host
        sets.append(f"seamwatch_metrics={shown}:{port}")
    if replica_header:
        sets.append(f"seamwatch_replica_header={replica_header}")
    if client_header:
        sets.append(f"seamwatch_client_header={client_header}")
    return [arg for value in sets for arg in ("--set", value)]


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
