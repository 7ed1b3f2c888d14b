"""The `seamwatch proxy` process the pytest plugin starts: on a free loopback port, waited for
until it listens, stopped so that it closes its capture (`analyzer.pytest_plugin`)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

__all__ = ["START_TIMEOUT_S", "STOP_TIMEOUT_S", "ProxyFailed", "ProxyProcess", "launch"]

#: How long the proxy may take to listen before the session fails (it never hangs).
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 15.0


class ProxyFailed(Exception):
    """The proxy exited or did not listen in time; the message is one line for the user."""


@dataclass
class ProxyProcess:
    """A `seamwatch proxy` process this session started, with its log file."""

    process: subprocess.Popen[bytes]
    url: str
    log: IO[bytes]
    log_path: Path

    def stop(self) -> int:
        """SIGTERM (a clean stop closes the capture), then SIGKILL after a bound; its exit
        code (1: the proxy says its capture is incomplete)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self.log.close()
        return int(self.process.returncode)


def launch(
    upstream: str, capture: Path, log_path: Path, *, replica_header: str | None
) -> ProxyProcess:
    """Start the proxy in front of `upstream`, capturing into `capture`, its stderr appended to
    `log_path`; ProxyFailed when it cannot start."""
    reason = "no attempt"
    # A port found free may be taken before the proxy binds it: try another then.
    for _ in range(3):
        port = _free_port()
        argv = [sys.executable, "-m", "analyzer.cli", "proxy"]
        argv += ["--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--out", str(capture)]
        if replica_header:
            argv += ["--replica-header", replica_header]
        log = log_path.open("ab")
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
        proxy = ProxyProcess(process, f"http://127.0.0.1:{port}", log, log_path)
        try:
            _wait_listening(proxy, port)
        except ProxyFailed as e:
            proxy.stop()
            reason = str(e)
            if "address in use" in reason:
                continue
            raise
        return proxy
    raise ProxyFailed(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(proxy: ProxyProcess, port: int) -> None:
    """Return once the proxy accepts connections (it opens its capture first); ProxyFailed
    with the proxy's own last line when it exits, or after START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proxy.process.poll() is not None:
            raise ProxyFailed(_last_line(proxy.log_path) or f"exit {proxy.process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise ProxyFailed(f"it did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s")


def _last_line(path: Path) -> str:
    """The last non-empty line of the proxy's log (where it says why it stopped)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
