"""`seamwatch proxy`: mitmdump in reverse mode with the capture addon loaded."""

from __future__ import annotations

from pathlib import Path

CAPTURE_ADDON = Path(__file__).resolve().parent / "seamwatch_capture.py"


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
    """The mitmdump command line that `seamwatch proxy` runs."""
    args = [
        "--mode",
        f"reverse:{upstream}",
        "--listen-host",
        listen_host,
        "--listen-port",
        str(listen_port),
        "-s",
        str(CAPTURE_ADDON),
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
    """Run mitmdump in this process until SIGINT or SIGTERM."""
    from mitmproxy.tools.main import mitmdump

    mitmdump(args)
    return 0
