"""Start the official-SDK lab server from a scenario and talk to its control plane."""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from lab.framework import LabContext, python_argv

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class SdkServer:
    """A running `lab.servers.sdk_server` process; `root` is its http://127.0.0.1:PORT, and
    `replicas` the roots of every listener (root first) when it listens as several replicas."""

    root: str
    process: subprocess.Popen[bytes]
    replicas: tuple[str, ...] = ()

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

    def report_progress_into(
        self, seen: list[float]
    ) -> Callable[[float, float | None, str | None], Awaitable[None]]:
        """A progress callback for `slow_report` with `close_after=1`: it appends each progress
        value to `seen` and opens gate "slow-report" at progress 1 (then on the wire, so the
        server may close the stream only now)."""

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)
            if progress == 1:
                await self.open_gate("slow-report")

        return on_progress


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
    json_response: bool = False,
    replicas: int = 1,
    wait: bool = True,
) -> SdkServer:
    """Start `lab.servers.sdk_server` on a free port and wait until it listens.

    With `wait=False` it returns at once: start the proxy meanwhile, then
    `ctx.wait_ready(server.process)`. With `replicas` > 1 it also listens on that many ports
    less one, each listener a replica sharing the server's state (`--also-port`).
    """
    port = ctx.free_port()
    ports = [port, *(ctx.free_port() for _ in range(replicas - 1))]
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
    if json_response:
        argv.append("--json-response")
    for also in ports[1:]:
        argv += ["--also-port", str(also)]
    process = ctx.start_process(argv, name=name, port=port, wait=wait)
    roots = tuple(f"http://127.0.0.1:{p}" for p in ports)
    return SdkServer(roots[0], process, roots if replicas > 1 else ())


def start_sdk_behind_proxy(ctx: LabContext, **options: Any) -> tuple[SdkServer, str]:
    """Start the SDK server and the seamwatch proxy in front of it, side by side.

    Returns the server and the MCP endpoint URL through the proxy. `options` are those of
    `start_sdk_server`.
    """
    server = start_sdk_server(ctx, wait=False, **options)
    url = ctx.start_proxy(server.root) + MCP_PATH
    ctx.wait_ready(server.process)
    return server, url
