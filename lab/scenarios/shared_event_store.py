"""shared-event-store: two sessions' resumes replay each other's events from one event store.

The mcp 2.3 SDK server keys a POST stream's stored events by the request's JSON-RPC id, and its
`EventStore` interface carries no session; one store serves every session of the process (the
lab's, as an in-memory store or a Redis store behind replicas would). Each client numbers its
requests from 1, so two sessions' streams of request 3 share one key, and a resume replays both.
On the wire (2025-11-25, two official clients in `mode="legacy"` at once, lab event store with
one counter for event ids, `retry: 200` in every priming event):

1. Each client: `initialize` (id 1), the standalone GET stream, `tools/list` (id 2).
2. Both at once: `tools/call slow_report {"steps": 3, "close_after": 1}` (id 3 in each session).
   The server closes both streams after their progress 1; both tools run on, and their progress
   2, 3 and results are stored, interleaved, under key "3".
3. Each client waits the `retry` and resumes with a GET carrying the last id it saw. The store
   replays every event under key "3" after that cursor: its own session's rest and the other
   session's, so a client receives two sets of progress and two results for request 3.
4. DELETE ends each session.

Expected: cross-session-replay (a resume answering request 3 twice, with events the other
session received too); evidence request 3. The two results are equal ("report done in 3
steps"), so duplicate-response (which needs different answers) has nothing to say.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

SESSIONS = 2
STEPS = 3
RETRY_MS = 200


async def _session(k: int, server: SdkServer, url: str, seen: dict[str, list[float]]) -> None:
    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name=f"seamwatch-lab-shared-event-store-{k}", version="1"),
    )
    progress = seen.setdefault(f"session-{k}", [])
    async with client:
        await client.list_tools()
        result = await client.call_tool(
            "slow_report",
            {"steps": STEPS, "close_after": 1},
            progress_callback=server.report_progress_into(progress),
        )
        if result.is_error:
            raise LabError(f"slow_report failed in session {k}: {result.content}")


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    seen: dict[str, list[float]] = {}
    async with anyio.create_task_group() as sessions:
        for k in range(SESSIONS):
            sessions.start_soon(_session, k, server, url, seen)
    ctx.note("progress_seen", dict(sorted(seen.items())))
    replays = (await server.state())["event_store"]["replays"]
    ctx.note("replays", replays)
    # The fault shows: some client saw more progress than its own call made.
    if len(replays) != SESSIONS or all(len(p) <= STEPS for p in seen.values()):
        raise LabError(f"no resume replayed the other session's events: {seen}, {replays}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="counter", retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="shared-event-store",
    description="two sessions' resumes replay each other's events from one event store",
    run=run,
    expected_path=Path(__file__).with_name("shared_event_store.expected.json"),
)
