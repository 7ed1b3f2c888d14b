"""cursor-past-end: a cursor past the end of its stream's log is answered 200, an empty replay.

Reproduces go-sdk #1131 / PR #1132 (a `Last-Event-ID` whose index lies past the end of the
in-memory log made the handler panic; the fix answers it 200 with an empty replay, so the
client is never told the cursor was not honoured): one `lab.faults.bugs --bug past-end`, ids
`<stream key>_<index>` as the Go SDK's store makes them (the standalone stream's key is empty:
`_0`, `_1`, ...). What differs from the report: the lab's server is Python and the resume is
made once, by a scripted client sending the out-of-range cursor as the report's reproduction
did. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `GET` without a cursor opens the standalone stream: `_0` (priming), `_1` (a
   `notifications/message`), then `_2` (an alert sent through `/lab/notify`, off the wire); the
   client closes the connection.
3. `GET` + `Last-Event-ID: _999999`. The server answers 200, replays nothing and attaches the
   connection to the standalone stream: the next alert arrives as `_3`. Nothing says the
   cursor was past the end.
4. `DELETE` ends the session.

Expected: stale-cursor (a Last-Event-ID this session never issued, answered as if it had been).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, open_session
from lab.scenarios._sdk_bug import BugReplica, run_bug_behind_proxy

PAST_END = "_999999"


async def _drive(ctx: LabContext, server: BugReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-cursor-past-end")
        await open_session(ctx, client)
        session: str = client.session_id or ""
        async with client.get_stream() as stream:
            await stream.until(lambda event: event.message is not None)
            alert_id, _ = await server.notify_sent(session, "disk 91% full")
            await stream.until(lambda event: event.id == alert_id)
        ctx.note("get_event_ids", [e.id for e in stream.events])

        async with client.get_stream(PAST_END) as resumed:
            later_id, sent = await server.notify_sent(session, "disk 97% full")
            await resumed.until(lambda event: event.id == later_id)
        ctx.note("resume_event_ids", [e.id for e in resumed.events])
        if [e.id for e in stream.events] != ["_0", "_1", "_2"] or later_id != "_3" or not sent:
            raise LabError(f"unexpected ids {stream.events}, then {resumed.events}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(ctx, _drive, bug="past-end", session_prefix="pastend")


SCENARIO = Scenario(
    name="cursor-past-end",
    description="a cursor past the end of the log is answered 200 with an empty replay",
    run=run,
    expected_path=Path(__file__).with_name("cursor_past_end.expected.json"),
)
