"""What the buffer-fault scenarios share: one fault replica, a progress call dropped at a cursor.

`ring_buffer_eviction` and `ttl_counter_reset` differ only in the buffer fault they switch on
and in what the resume brings back; this module is not a scenario itself (the leading underscore
keeps it out of the registry check in tests/lab/test_framework.py).
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
    await client.initialize()
    ctx.note("session", client.session_id)
    await client.request("tools/list")
    call_id: int = client.next_id()  # annotated: mypy may see lab.clients as skipped (Any)
    async with client.post(progress_call(call_id, "slow_report", report)) as call:
        await call.until(lambda event: event.id == cursor)
        ctx.note("call_event_ids", [e.id for e in call.events])
    return call_id


async def end_session(client: SessionedClient) -> None:
    """`DELETE` the session; LabError unless the server answers 200."""
    status = await client.delete()
    if status != 200:
        raise LabError(f"DELETE answered {status}")


def run_behind_proxy(
    ctx: LabContext,
    drive: Callable[[LabContext, FaultReplica, str], Awaitable[None]],
    *,
    replica: str,
    session_prefix: str,
    buffer_size: int | None = None,
    buffer_ttl: float | None = None,
    pause_after: int | None = None,
) -> None:
    """Start one fault replica behind the capturing proxy and run `drive(ctx, server, url)`."""
    server = start_replica(
        ctx,
        replica=replica,
        store=ctx.out_dir / "sessions.sqlite3",
        session_prefix=session_prefix,
        buffer_size=buffer_size,
        buffer_ttl=buffer_ttl,
        pause_after=pause_after,
    )
    url = ctx.start_proxy(server.root, replica_header="X-Served-By") + MCP_PATH
    ctx.run_async(drive, ctx, server, url)
