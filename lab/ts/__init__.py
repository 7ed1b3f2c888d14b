"""The lab's server and client on the TypeScript SDK (`server.mjs`, `client.mjs`): their install,
the server's start and the client's run.

`node_modules/` is not committed; `ensure_installed()` runs `npm ci` from the committed
`package-lock.json` when the pinned SDK is missing. Setup scripts can run the same thing:
`npm ci --prefix lab/ts --no-audit --no-fund`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lab.framework import LabContext, LabError

TS_DIR = Path(__file__).resolve().parent
SDK_PACKAGE = "@modelcontextprotocol/sdk"
MCP_PATH = "/mcp"
INSTALL_TIMEOUT_S = 300.0


def _pinned_sdk() -> str:
    manifest = json.loads((TS_DIR / "package.json").read_text(encoding="utf-8"))
    return str(manifest["dependencies"][SDK_PACKAGE])


def installed() -> bool:
    """Whether node_modules holds the SDK version package.json pins."""
    try:
        found = json.loads(
            (TS_DIR / "node_modules" / SDK_PACKAGE / "package.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return False
    return bool(found.get("version") == _pinned_sdk())


def ensure_installed() -> None:
    """`npm ci` in lab/ts unless the pinned SDK is already there; LabError when it fails."""
    if installed():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise LabError("npm is not on PATH: the TypeScript lab server needs Node 20 and npm")
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=TS_DIR,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"npm ci in {TS_DIR} took over {INSTALL_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0 or not installed():
        raise LabError(f"npm ci in {TS_DIR} failed ({done.returncode}): {done.stderr[-1500:]}")


@dataclass(frozen=True)
class TsServer:
    """A running `server.mjs`; `root` is its http://127.0.0.1:PORT."""

    root: str

    async def state(self) -> dict[str, Any]:
        """`/lab/state`: sessions, running tools, tickets filed."""
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{self.root}/lab/state")
            response.raise_for_status()
            state: dict[str, Any] = response.json()
            return state

    async def settle(self) -> dict[str, Any]:
        """Wait until every tool call's response was sent (stored for replay when unread)."""
        async with httpx.AsyncClient(timeout=15.0) as http:
            response = await http.post(f"{self.root}/lab/settle")
        state: dict[str, Any] = response.json()
        if response.status_code != 200:
            raise LabError(f"the TypeScript server did not settle: {state}")
        return state


def start_ts_server(
    ctx: LabContext,
    *,
    name: str = "ts-server",
    pause_after: int | None = None,
    close_after: int | None = None,
    retry_ms: int | None = None,
    stateless: bool = False,
) -> TsServer:
    """Start `node server.mjs` on a free port; LabError if Node or the SDK install is missing."""
    port = ctx.free_port()
    argv = [_node(), str(TS_DIR / "server.mjs"), "--port", str(port)]
    if pause_after is not None:
        argv += ["--pause-after", str(pause_after)]
    if close_after is not None:
        argv += ["--close-after", str(close_after)]
    if retry_ms is not None:
        argv += ["--retry-ms", str(retry_ms)]
    if stateless:
        argv.append("--stateless")
    ctx.start_process(argv, name=name, port=port)
    return TsServer(f"http://127.0.0.1:{port}")


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise LabError("node is not on PATH: the TypeScript lab needs Node 20")
    if not installed():
        raise LabError(
            f"{SDK_PACKAGE} {_pinned_sdk()} is not installed in {TS_DIR}: run "
            "`npm ci --prefix lab/ts --no-audit --no-fund` (or lab.ts.ensure_installed())"
        )
    return node


def run_ts_client(
    ctx: LabContext, url: str, control: str, *options: str, name: str = "ts-client"
) -> dict[str, Any]:
    """Run `node client.mjs` against the MCP endpoint `url` (`control`: the lab server's root,
    for its gates; `options`: the client's own, e.g. `--retry-call`) to its end, bounded by
    the scenario's budget; its stderr goes to `logs/<name>.log`. The notes it printed (one JSON
    line) become the scenario's notes, and are returned; LabError when it fails."""
    argv = [_node(), str(TS_DIR / "client.mjs"), "--url", url, "--control", control, *options]
    log_path = ctx.log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                timeout=ctx.remaining(),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # the child is killed by then
            raise LabError(f"{name}: no end within the scenario's budget") from exc
    if done.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:]
        raise LabError(f"{name} exited {done.returncode}: {tail}")
    lines = done.stdout.decode("utf-8", errors="replace").strip().splitlines()
    try:
        notes = json.loads(lines[-1])
    except (IndexError, ValueError):
        notes = None
    if not isinstance(notes, dict):
        raise LabError(f"{name} printed no notes: {done.stdout[-500:]!r}")
    for key, value in notes.items():
        ctx.note(key, value)
    return notes
