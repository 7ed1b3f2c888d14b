"""fresh-resume: a resume of the standalone GET stream is answered 200 with a fresh stream.

One `lab.faults.server` with `--fresh-resumes` (a `GET` with `Last-Event-ID` is answered with a
new standalone stream, whatever the buffer holds: nothing is ever replayed). The lab's
`/lab/notify` (called off the wire) sends a `notifications/message` on the session's standalone
stream. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `GET` without a cursor opens the standalone stream: e1 (priming), e2 (a
   `notifications/message` saying the stream opened), then e3 (`notifications/message`
   "disk 91% full", sent through `/lab/notify` once e2 was read). The client commits its cursor
   only after handling an event: it has handled e2, not yet e3, when it closes the connection.
3. The client resumes with `GET` + `Last-Event-ID: e2`. The server answers 200 with a fresh
   stream: e4 (priming) and e5 (another "stream opened" message). e3 never comes again, and
   nothing says the cursor was not honoured.
4. `DELETE` ends the session.

Expected: phantom-resume (the resume from e2 owed e3 and got the fresh e4, e5). Also true, so
allowed: causal-gap, whose "carried" part flags e3 (sent after the cursor before the resume,
never delivered again).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, open_session, run_behind_proxy

ALERT = "disk 91% full"


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-fresh-resume")
        await open_session(ctx, client)
        session: str = client.session_id or ""
        async with client.get_stream() as stream:
            opened = await stream.until(lambda event: event.message is not None)
            committed = opened.id  # handled: the client's cursor
            alert_id = await server.notify(session, ALERT)
            alert = await stream.until(lambda event: event.id == alert_id)
            # Leaving the block closes the connection before the alert was handled.
        ctx.note("get_event_ids", [e.id for e in stream.events])
        ctx.note("cursor", committed)
        ctx.note("unhandled_event_id", alert.id)
        if committed is None:
            raise LabError("the standalone stream's message carried no id")

        async with client.get_stream(committed) as resumed:
            await resumed.until(lambda event: event.message is not None)
        answer = [e.id for e in resumed.events]
        ctx.note("resume_event_ids", answer)
        if [e.id for e in stream.events] != ["e1", "e2", "e3"] or answer != ["e4", "e5"]:
            raise LabError(f"expected e1..e3, then e4, e5 on the resume: {stream.events}, {answer}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx, _drive, replica="fresh-resume", session_prefix="fresh", fresh_resumes=True
    )


SCENARIO = Scenario(
    name="fresh-resume",
    description="a resume of the standalone GET stream is answered 200 with a fresh stream",
    run=run,
    expected_path=Path(__file__).with_name("fresh_resume.expected.json"),
)
