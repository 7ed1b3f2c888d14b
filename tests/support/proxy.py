"""Run the real `seamwatch proxy` (mitmdump + the capture addon) as a subprocess on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
# Whether the running test is marked `proxy` (or `lab`): set for each test by tests/conftest.py.
# Starting the proxy from an unmarked test is an error, so `scripts/test --fast`, which leaves
# the tier out, never leaves out a proxy test silently nor runs one it meant to leave out.
tier_marked = False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"proxy exited with {proc.returncode}: {err[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"proxy did not listen on {port} within {timeout}s")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    """Stop a process this test started, by its pid: `sig`, then SIGKILL after `timeout` s."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Proxy:
    """A running proxy: its URL, capture directory and process."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, out: Path) -> None:
        self.proc, self.port, self.out = proc, port, out

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        stop(self.proc, sig, timeout)


@contextmanager
def run_proxy(
    upstream: str | None,
    out: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    stderr: IO[bytes] | None = None,
) -> Iterator[Proxy]:
    """`seamwatch proxy` in front of `upstream` (None: `extra` gives a forward `--mode`),
    stopped by its pid (SIGTERM) at exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "analyzer.cli", "proxy"]
    if upstream is not None:
        cmd += ["--upstream", upstream]
    cmd += ["--listen", f"127.0.0.1:{port}", "--out", str(out), *extra]
    with _running(cmd, port, out, env, stderr) as proxy:
        yield proxy


@contextmanager
def run_mitmdump(
    upstream: str, out: Path, *scripts: Path, env: dict[str, str] | None = None
) -> Iterator[Proxy]:
    """mitmdump with the capture addon as `seamwatch proxy` runs it, plus more addon `scripts`
    (loaded after it), in front of `upstream`; stopped by its pid at exit."""
    from addons.proxy import CAPTURE_ADDON, mitmdump_args

    port = free_port()
    argv = mitmdump_args(upstream=upstream, listen_host="127.0.0.1", listen_port=port, out=out)
    for script in (CAPTURE_ADDON, *scripts):
        argv += ["-s", str(script)]
    cmd = [sys.executable, "-c", "from mitmproxy.tools.main import mitmdump; mitmdump()", *argv]
    with _running(cmd, port, out, env) as proxy:
        yield proxy


@contextmanager
def _running(
    cmd: list[str],
    port: int,
    out: Path,
    env: dict[str, str] | None,
    stderr: IO[bytes] | None = None,
) -> Iterator[Proxy]:
    """A proxy command started, listening on `port` with its capture open; stopped at exit."""
    if not tier_marked:
        raise AssertionError("a test that starts the real proxy must be marked `proxy`")
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=stderr if stderr is not None else subprocess.PIPE,
    )
    proxy = Proxy(proc, port, out)
    try:
        wait_port(port, proc)
        # mitmdump listens before its `-s` scripts have loaded: wait for the capture to open
        # (`seamwatch proxy` opens it before it listens).
        deadline = time.monotonic() + 20
        while not list(out.glob("capture-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proxy
    finally:
        proxy.stop()


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every whole record in a capture directory, in seq order (a torn last line is skipped)."""
    records = []
    for path in sorted(out.glob("capture-*.jsonl*")):
        for line in path.read_bytes().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return sorted(records, key=lambda r: r["seq"])
