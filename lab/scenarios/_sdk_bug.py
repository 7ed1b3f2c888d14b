"""What the reported-SDK-bug scenarios share: `lab.faults.bugs` replicas, behind the proxy.

Not a scenario itself (the leading underscore keeps it out of the registry check in
tests/lab/test_framework.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from lab.faults.launch import MCP_PATH, FaultReplica
from lab.framework import LabContext, LabError, python_argv


@dataclass(frozen=True)
class BugReplica(FaultReplica):
    """A running `lab.faults.bugs` process: the fault server's control plane, and `release`."""

    async def release(self) -> None:
        """`/lab/release`: a tool paused by `replace-resume` goes on."""
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{self.root}/lab/release")
        if response.status_code != 200:
            raise LabError(f"{self.name} could not release its tool: {response.text}")

    async def notify_sent(self, session: str, text: str) -> tuple[str, bool]:
        """`/lab/notify`: the event id of a standalone notification and whether it was sent
        (a connection was attached to the standalone stream) or only buffered."""
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{self.root}/lab/notify", params={"session": session, "text": text}
            )
        if response.status_code != 200:
            raise LabError(f"{self.name} could not notify {session}: {response.text}")
        answer = response.json()
        return str(answer["event_id"]), bool(answer["sent"])


def start_bug_replica(
    ctx: LabContext,
    *,
    bug: str,
    replica: str,
    store: Path,
    session_prefix: str,
    pause_after: int | None = None,
) -> BugReplica:
    """Start one `lab.faults.bugs` replica showing `bug`, named `replica` (X-Served-By)."""
    port = ctx.free_port()
    argv = python_argv(
        "lab.faults.bugs",
        *("--port", str(port), "--replica", replica, "--store", str(store)),
        *("--session-prefix", session_prefix, "--bug", bug),
    )
    if pause_after is not None:
        argv += ["--pause-after", str(pause_after)]
    ctx.start_process(argv, name=replica, port=port)
    return BugReplica(replica, f"http://127.0.0.1:{port}")


def run_bug_behind_proxy(
    ctx: LabContext,
    drive: Callable[[LabContext, BugReplica, str], Awaitable[None]],
    *,
    bug: str,
    session_prefix: str,
    pause_after: int | None = None,
) -> None:
    """One `lab.faults.bugs` replica (named after the scenario) behind the capturing proxy;
    then `drive(ctx, server, url)` with the MCP endpoint URL through the proxy."""
    server = start_bug_replica(
        ctx,
        bug=bug,
        replica=ctx.name,
        store=ctx.out_dir / "sessions.sqlite3",
        session_prefix=session_prefix,
        pause_after=pause_after,
    )
    url = ctx.start_proxy(server.root, replica_header="X-Served-By") + MCP_PATH
    ctx.run_async(drive, ctx, server, url)
