"""What the single-replica fault scenarios share: one fault replica behind the proxy, a session,
a progress call dropped at a cursor or read until the server ends it.

The scenarios differ in the fault they switch on and in what the resume brings back; this module
is not a scenario itself (the leading underscore keeps it out of the registry check in
tests/lab/test_framework.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lab.clients.raw import SessionedClient
from lab.faults.launch import MCP_PATH, FaultReplica, progress_call, start_replica
from lab.framework import LabContext, LabError


async def drop_call_at(
    ctx: LabContext, client: SessionedClient, *, report: dict[str, Any], cursor: str
) -> int:
    """Open a session, then close `tools/call slow_report` once `cursor` came; its request id.

    initialize, notifications/initialized, tools/list, then the call with a progress token
    (answered with SSE); the connection closes when the event with id `cursor` arrived.
    """
    await open_session(ctx, client)
    call_id: int = client.next_id()  # annotated: mypy may see lab.clients as skipped (Any)
    async with client.post(progress_call(call_id, "slow_report", report)) as call:
        await call.until(lambda event: event.id == cursor)
        ctx.note("call_event_ids", [e.id for e in call.events])
    return call_id


async def call_until_server_ends(
    ctx: LabContext, client: SessionedClient, *, report: dict[str, Any]
) -> tuple[int, list[Any], str | None]:
    """Open a session, then read `tools/call slow_report` until the server ends the response.

    Returns the call's request id, the events it carried and the last event id seen.
    """
    await open_session(ctx, client)
    call_id: int = client.next_id()
    async with client.post(progress_call(call_id, "slow_report", report)) as call:
        while await call.next_event() is not None:
            pass  # read until the server ends the response
    ctx.note("call_event_ids", [e.id for e in call.events])
    return call_id, list(call.events), call.last_event_id


async def open_session(ctx: LabContext, client: SessionedClient) -> None:
    """initialize (+ notifications/initialized), then tools/list, so tools are annotated."""
    await client.initialize()
    ctx.note("session", client.session_id)
    await client.request("tools/list")


async def end_session(client: SessionedClient) -> None:
    """`DELETE` the session; LabError unless the server answers 200."""
    status = await client.delete()
    if status != 200:
        raise LabError(f"DELETE answered {status}")


def replica_behind_proxy(
    ctx: LabContext, *, replica: str, session_prefix: str, **faults: Any
) -> tuple[FaultReplica, str]:
    """Start one fault replica (`faults`: `start_replica`'s switches) behind the capturing proxy;
    returns the replica and the MCP endpoint URL through the proxy."""
    server = start_replica(
        ctx,
        replica=replica,
        store=ctx.out_dir / "sessions.sqlite3",
        session_prefix=session_prefix,
        **faults,
    )
    return server, ctx.start_proxy(server.root, replica_header="X-Served-By") + MCP_PATH


def run_behind_proxy(
    ctx: LabContext,
    drive: Callable[[LabContext, FaultReplica, str], Awaitable[None]],
    *,
    replica: str,
    session_prefix: str,
    **faults: Any,
) -> None:
    """`replica_behind_proxy`, then run `drive(ctx, server, url)`."""
    server, url = replica_behind_proxy(
        ctx, replica=replica, session_prefix=session_prefix, **faults
    )
    ctx.run_async(drive, ctx, server, url)
