"""dashboards.serve: the dashboard bound to every address contacts nothing outside loopback."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from dashboards import launch as L
from tests.support.proxy import free_port, stop

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dashboard" / "round-robin-replicas" / "capture"

# Installed in the server's interpreter (sitecustomize): every connect and name lookup, logged.
AUDIT = """\
import json, sys
_log = open({log!r}, "a", buffering=1)
def _hook(event, args):
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple):
            kind = "udp-connect" if args[0].type == 2 else "connect"
            _log.write(json.dumps([kind, str(address[0])]) + "\\n")
    elif event == "socket.getaddrinfo":
        _log.write(json.dumps(["getaddrinfo", str(args[0])]) + "\\n")
sys.addaudithook(_hook)
_log.write(json.dumps(["installed", "localhost"]) + "\\n")
"""

LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "None", ""}


def _websocket_from_afar(port: int) -> bytes:
    """A WebSocket upgrade whose Origin is another machine: Streamlit checks it against this
    machine's addresses (the lookups under test)."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: http://192.0.2.7:{port}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode())
        return s.recv(200)


@pytest.mark.timeout(90)
def test_a_dashboard_on_every_address_makes_no_outbound_connection(tmp_path: Path) -> None:
    log, hooks = tmp_path / "audit.jsonl", tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(AUDIT.format(log=str(log)))
    port = free_port()
    env = L.environment([str(FIXTURE)])
    env["PYTHONPATH"] = os.pathsep.join([str(hooks), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        L.command(port=port, address="0.0.0.0"),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else b""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the dashboard did not start"
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
        _websocket_from_afar(port)
        time.sleep(2.5)  # Streamlit's lookups time out after 1 s each
    finally:
        stop(proc, timeout=20)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["installed", "localhost"] in events  # the hook ran in the server
    # A UDP connect sends nothing (Streamlit's way to learn the local address): not outbound.
    outside = [
        e
        for e in events
        if e[0] != "udp-connect" and e[1] not in LOCAL and not e[1].startswith("127.")
    ]
    assert outside == []
