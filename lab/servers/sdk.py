"""Start the official-SDK lab server from a scenario and talk to its control plane."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

import httpx

from lab.framework import LabContext, python_argv

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class SdkServer:
    """A running `lab.servers.sdk_server` process; `root` is its http://127.0.0.1:PORT."""

    root: str
    process: subprocess.Popen[bytes]

    async def state(self) -> dict[str, Any]:
        """`/lab/state`, read directly (never through the proxy, so it is not captured)."""
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{self.root}/lab/state")
            response.raise_for_status()
            state: dict[str, Any] = response.json()
            return state

    async def open_gate(self, name: str) -> None:
        """Release a tool waiting on gate `name`."""
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{self.root}/lab/gates/{name}")
            response.raise_for_status()


def start_sdk_server(
    ctx: LabContext,
    *,
    name: str = "sdk-server",
    event_ids: str = "counter",
    seed: int = 0,
    retry_ms: int | None = None,
    max_events: int | None = None,
    charge_gate: bool = False,
    stateless: bool = False,
    wait: bool = True,
) -> SdkServer:
    """Start `lab.servers.sdk_server` on a free port and wait until it listens.

    With `wait=False` it returns at once: start the proxy meanwhile, then
    `ctx.wait_ready(server.process)`.
    """
    port = ctx.free_port()
    argv = python_argv(
        "lab.servers.sdk_server", "--port", str(port), "--event-ids", event_ids, "--seed", str(seed)
    )
    if retry_ms is not None:
        argv += ["--retry-ms", str(retry_ms)]
    if max_events is not None:
        argv += ["--max-events", str(max_events)]
    if charge_gate:
        argv.append("--charge-gate")
    if stateless:
        argv.append("--stateless")
    process = ctx.start_process(argv, name=name, port=port, wait=wait)
    return SdkServer(f"http://127.0.0.1:{port}", process)


def start_sdk_behind_proxy(ctx: LabContext, **options: Any) -> tuple[SdkServer, str]:
    """Start the SDK server and the seamwatch proxy in front of it, side by side.

    Returns the server and the MCP endpoint URL through the proxy. `options` are those of
    `start_sdk_server`.
    """
    server = start_sdk_server(ctx, wait=False, **options)
    url = ctx.start_proxy(server.root) + MCP_PATH
    ctx.wait_ready(server.process)
    return server, url
