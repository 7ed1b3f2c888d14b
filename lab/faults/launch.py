"""Start the lab's fault servers and balancer from a scenario, and talk to their control plane.

The server itself is `lab.faults.server` (one module, faults as switches); the balancer is
`lab.balancer`. Control calls go to a replica directly, never through the proxy or the
balancer, so they are neither captured nor counted in the round-robin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lab.faults.server import Faults
from lab.framework import LabContext, LabError, python_argv

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class FaultReplica:
    """A running `lab.faults.server` process; `root` is its http://127.0.0.1:PORT."""

    name: str
    root: str

    async def state(self) -> dict[str, Any]:
        """`/lab/state`: buffers, counters, running tools, tickets filed."""
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{self.root}/lab/state")
            response.raise_for_status()
            state: dict[str, Any] = response.json()
            return state

    async def notify(self, session: str, text: str) -> str:
        """`/lab/notify`: a `notifications/message` on the session's standalone GET stream;
        returns its event id."""
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{self.root}/lab/notify", params={"session": session, "text": text}
            )
        if response.status_code != 200:
            raise LabError(f"{self.name} could not notify {session}: {response.text}")
        return str(response.json()["event_id"])

    async def settle(self, *, collected: bool = False) -> dict[str, Any]:
        """Wait until no tool runs on the replica (and its buffers are collected, if asked)."""
        query = "?collected=1" if collected else ""
        async with httpx.AsyncClient(timeout=15.0) as http:
            response = await http.post(f"{self.root}/lab/settle{query}")
        state: dict[str, Any] = response.json()
        if response.status_code != 200:
            raise LabError(f"{self.name} did not settle: {state}")
        return state


def start_replica(
    ctx: LabContext, *, replica: str, store: Path, session_prefix: str, **switches: Any
) -> FaultReplica:
    """Start one `lab.faults.server` replica named `replica` (its X-Served-By value), with the
    fault `switches` of `lab.faults.server.Faults` (`buffer_size=4`, `ignore_delete=True`, ...)."""
    faults = Faults(replica, **switches)
    port = ctx.free_port()
    argv = python_argv(
        "lab.faults.server",
        *("--port", str(port), "--replica", replica, "--store", str(store)),
        *("--session-prefix", session_prefix),
        *faults.options(),
    )
    ctx.start_process(argv, name=replica, port=port)
    return FaultReplica(replica, f"http://127.0.0.1:{port}")


def start_lenient_modern(ctx: LabContext, *, replica: str) -> FaultReplica:
    """Start one `lab.faults.modern` server: 2026-07-28, Mcp-* headers never checked."""
    port = ctx.free_port()
    argv = python_argv("lab.faults.modern", "--port", str(port), "--replica", replica)
    ctx.start_process(argv, name=replica, port=port)
    return FaultReplica(replica, f"http://127.0.0.1:{port}")


def start_balancer(ctx: LabContext, roots: Sequence[str]) -> str:
    """Start `lab.balancer` round-robin over the replicas at `roots` (http://127.0.0.1:PORT
    each); returns its own http://127.0.0.1:PORT."""
    port = ctx.free_port()
    argv = python_argv("lab.balancer", "--port", str(port))
    for root in roots:
        argv += ["--replica", root]
    ctx.start_process(argv, name="balancer", port=port)
    return f"http://127.0.0.1:{port}"


def progress_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A `tools/call` asking for progress, which makes the fault server answer with SSE."""
    params = {"name": name, "arguments": arguments, "_meta": {"progressToken": f"p{request_id}"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def served_by(response: httpx.Response) -> str:
    """The replica that answered (`X-Served-By`), or "?" when the header is missing."""
    return str(response.headers.get("x-served-by", "?"))
