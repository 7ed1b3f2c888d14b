"""legacy-cursor-carryover: a client carries the last SSE id of an old session into a new one.

On the wire (2025-11-25, raw httpx client, SDK server with the lab event store, counter ids):

1. Session A: `initialize` (priming 1, result 2), `notifications/initialized`, `tools/list`
   (priming 3, result 4), `get_balance` (priming 5, result 6). Like an EventSource-style client
   it persists the last SSE id it saw, "6" (to `cursor.txt` beside the capture), then DELETEs A.
2. Session B: `initialize` carrying `Last-Event-ID: 6`, the cursor of session A. The SDK ignores
   the header on a POST and opens session B (priming 7, result 8); the client goes on with
   `notifications/initialized` and `tools/list`, then DELETEs B.

Expected: stale-cursor (a cursor issued in another session, sent with `initialize`), evidence
the carried cursor. The ids are deterministic: a fresh server, a process-wide counter.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import start_sdk_behind_proxy

CARRIED_CURSOR = "6"  # what the scenario produces; checked against the run below


async def _drive(ctx: LabContext, url: str) -> None:
    cursor_file = ctx.out_dir / "cursor.txt"
    async with httpx.AsyncClient(timeout=ctx.remaining()) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-legacy-client")
        await client.initialize()
        session_a = client.session_id
        await client.request("tools/list")
        _, stream = await client.call_tool("get_balance", {"account": "acme"})
        cursor = stream.last_event_id
        if cursor is None:
            raise LabError("the server issued no SSE ids; is the event store on?")
        cursor_file.write_text(cursor, encoding="utf-8")
        if await client.delete() != 200:
            raise LabError("DELETE of session A failed")

        # A new run of the client: it reads back its persisted cursor, into a new session.
        carried = cursor_file.read_text(encoding="utf-8")
        await client.initialize(headers={"last-event-id": carried})
        session_b = client.session_id
        await client.request("tools/list")
        if await client.delete() != 200:
            raise LabError("DELETE of session B failed")
    ctx.note("sessions", [session_a, session_b])
    ctx.note("carried_cursor", carried)
    if carried != CARRIED_CURSOR or session_a == session_b:
        raise LabError(f"carried cursor {carried!r}, expected.json names {CARRIED_CURSOR!r}")


def run(ctx: LabContext) -> None:
    _, url = start_sdk_behind_proxy(ctx, event_ids="counter")
    ctx.run_async(_drive, ctx, url)


SCENARIO = Scenario(
    name="legacy-cursor-carryover",
    description="a client sends the last SSE id of an ended session with initialize of a new one",
    run=run,
    expected_path=Path(__file__).with_name("legacy_cursor_carryover.expected.json"),
)
