"""`seamwatch dashboard`: run the Streamlit app with secure defaults (issue 7).

The server binds to loopback unless `--address` says otherwise (which prints a warning), sends
no usage statistics, shows visitors no exception details or external help links, keeps XSRF
protection and CORS on, accepts only loopback `Host` names when bound to loopback (DNS
rebinding), does not watch or rerun the app's source, hides the developer toolbar, opens no
browser and makes no outbound connection (`dashboards.serve`). The input paths reach the app
through `SOURCE_ENV` (a JSON list), not argv: `AppTest` runs the app in the test process, whose
argv is pytest's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from analyzer.command import is_loopback

__all__ = [
    "APP",
    "LOOPBACK_HOSTS",
    "OPTIONS_ENV",
    "SOURCE_ENV",
    "command",
    "decode_options",
    "decode_source",
    "environment",
    "is_loopback",
    "launch",
]

#: Environment variable carrying the input paths from the launcher to the app: a JSON list of
#: strings (a value that is not one is taken as a single path, for a hand-made start).
SOURCE_ENV: Final = "SEAMWATCH_DASHBOARD_PATH"

#: Environment variable carrying the analysis options (`--replica-header`, `--client-header`,
#: `--config`, `--only`, `--disable`, as `seamwatch analyze` takes them) to the app: a JSON
#: object of option name (underscored) to value, so the page shows what the CI job reported.
OPTIONS_ENV: Final = "SEAMWATCH_DASHBOARD_OPTIONS"

APP: Final = Path(__file__).resolve().parent / "app.py"

#: Host names a browser on this machine uses for a loopback-bound server.
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


def command(*, port: int, address: str) -> list[str]:
    """The `streamlit run` command line with the secure flags (see the module docstring)."""
    flags = {
        "server.address": address,
        "server.port": str(port),
        "server.headless": "true",
        "server.enableXsrfProtection": "true",
        "server.enableCORS": "true",
        "server.fileWatcherType": "none",
        "server.runOnSave": "false",
        "server.enableStaticServing": "false",
        "browser.gatherUsageStats": "false",
        "client.showErrorDetails": "none",
        "client.showErrorLinks": "false",
        "client.toolbarMode": "viewer",
    }
    # Through `dashboards.serve`: Streamlit's lookups of this machine's addresses contact the
    # internet (-P: nothing from the current folder is imported).
    argv = [sys.executable, "-P", "-m", "dashboards.serve", "run", str(APP)]
    for name, value in flags.items():
        argv += [f"--{name}", value]
    if is_loopback(address):
        # Refuse WebSocket connections whose Host is not a loopback name (DNS rebinding).
        for host in LOOPBACK_HOSTS:
            argv += ["--server.allowedHosts", host]
    return argv


def environment(
    paths: Sequence[str],
    base: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The app's environment: `base` (default os.environ) with the input paths and analysis
    options set, or unset when there are none."""
    env = dict(os.environ if base is None else base)
    env.pop(SOURCE_ENV, None)
    env.pop(OPTIONS_ENV, None)
    if paths:
        # As given: the server keeps our cwd, and shows them so.
        env[SOURCE_ENV] = json.dumps([str(p) for p in paths], ensure_ascii=False)
    if options:
        env[OPTIONS_ENV] = json.dumps(dict(sorted(options.items())), ensure_ascii=False)
    return env


def decode_options(value: str) -> dict[str, str]:
    """The analysis options `environment` set ({} for none or a value that is not one)."""
    try:
        options = json.loads(value) if value else {}
    except ValueError:
        return {}
    if not isinstance(options, dict):
        return {}
    return {str(k): v for k, v in options.items() if isinstance(v, str) and v}


def decode_source(value: str) -> tuple[str, ...] | None:
    """The paths `environment` set (None for none)."""
    if not value:
        return None
    try:
        paths = json.loads(value)
    except ValueError:
        return (value,)
    if isinstance(paths, list) and paths and all(isinstance(p, str) and p for p in paths):
        return tuple(paths)
    return (value,)


def launch(
    paths: Sequence[str], *, port: int, address: str, options: Mapping[str, str] | None = None
) -> int:
    """Serve the dashboard over `paths`; returns the exit code (on POSIX it never returns)."""
    for path in paths:
        if not Path(path).exists():
            print(f"seamwatch: {path}: no such file or directory", file=sys.stderr)
            return 2
    if not 0 < port < 65536:
        print(f"seamwatch: --port {port}: expected 1-65535", file=sys.stderr)
        return 2
    if not is_loopback(address):
        print(
            f"seamwatch: warning: the dashboard listens on {address}, not loopback: anyone who "
            "can reach this address sees the captured traffic (payloads, session ids). There is "
            "no authentication; put it behind one.",
            file=sys.stderr,
        )
    argv = command(port=port, address=address)
    env = environment(paths, options=options)
    print(f"seamwatch dashboard: http://{_url_host(address)}:{port}/", file=sys.stderr, flush=True)
    if os.name != "posix":
        return subprocess.run(argv, env=env, check=False).returncode
    # exec, so the pid the caller holds is the server's: stopping it stops the dashboard.
    os.execve(argv[0], argv, env)
    return 0  # not reached: execve replaced this process


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address
