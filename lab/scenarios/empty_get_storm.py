"""empty-get-storm: each standalone GET stream is ended empty by the server and reopened at once.

Reproduces python-sdk #3257 (`handle_get_stream` resets its attempt counter whenever a GET stream
ends cleanly, so a server that accepts the GET and ends it with zero events is reconnected to
forever, never with a cursor): one `lab.faults.bugs --bug empty-get`. What differs from the
report: the client is the lab's scripted raw client doing what the SDK's loop does, and it stops
after six attempts instead of never; it waits 50 ms between them (the SDK waits its reconnect
delay). On the wire (2025-11-25):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. Six times: `GET` without `Last-Event-ID` (no event ever gave the client a cursor), answered
   200 `text/event-stream` and ended by the server at once with no event.
3. `DELETE` ends the session.

Expected: reconnect-storm (six empty standalone streams in a row, each reopened at once).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, open_session
from lab.scenarios._sdk_bug import BugReplica, run_bug_behind_proxy

ATTEMPTS = 6
DELAY_S = 0.05


async def _drive(ctx: LabContext, server: BugReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-empty-get-storm")
        await open_session(ctx, client)
        cursor: str | None = None
        for _ in range(ATTEMPTS):
            async with client.get_stream(cursor) as stream:
                while await stream.next_event() is not None:
                    pass
            if stream.events:
                raise LabError(f"the GET stream carried {stream.events}")
            cursor = stream.last_event_id  # None: nothing to resume from
            await anyio.sleep(DELAY_S)
        ctx.note("attempts", ATTEMPTS)
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(ctx, _drive, bug="empty-get", session_prefix="storm")


SCENARIO = Scenario(
    name="empty-get-storm",
    description="the server ends each standalone GET stream empty; the client reopens it at once",
    run=run,
    expected_path=Path(__file__).with_name("empty_get_storm.expected.json"),
)
