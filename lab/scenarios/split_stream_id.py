"""split-stream-id: a resume of the standalone stream replays nothing; later notifications vanish.

Reproduces typescript-sdk #943 / #2560 (the example `InMemoryEventStore` recovers the stream id
of a `Last-Event-ID` by splitting it on `_`, so every `_GET_stream_<uuid>` id gives the empty
stream id): one `lab.faults.bugs --bug split-stream-id`. What differs from the report: the
lab's server is Python, its ids are `<stream key>_<uuid5>` (deterministic, so a re-run names
the same events) rather than `<stream key>_<epoch-ms>_<random>`, and its keep-alives are SSE
comments every 0.2 s. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `GET` without a cursor opens the standalone stream: a priming event and a
   `notifications/message`, then an alert sent through `/lab/notify` (off the wire). The client
   commits its cursor only after handling an event: it has handled the message, not yet the
   alert, when it closes the connection.
3. The client resumes with `GET` + `Last-Event-ID: <the message's id>`. The server answers 200
   and replays nothing: the alert never comes again, and the connection carries only keep-alive
   comments. A second alert sent meanwhile goes to the old stream key, which has no connection:
   it never reaches the wire.
4. The client gives up on the quiet stream, closes it, and `DELETE` ends the session.

Expected: causal-gap (the alert the stream carried after the cursor never reached the client by
the end of its chain).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, open_session
from lab.scenarios._sdk_bug import BugReplica, run_bug_behind_proxy

ALERT = "disk 91% full"
LATER = "disk 97% full"
QUIET_S = 1.0


async def _drive(ctx: LabContext, server: BugReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-split-stream-id")
        await open_session(ctx, client)
        session: str = client.session_id or ""
        async with client.get_stream() as stream:
            opened = await stream.until(lambda event: event.message is not None)
            alert_id, _ = await server.notify_sent(session, ALERT)
            await stream.until(lambda event: event.id == alert_id)
        cursor = opened.id
        ctx.note("get_event_ids", [e.id for e in stream.events])
        ctx.note("cursor", cursor)
        ctx.note("unhandled_event_id", alert_id)
        if cursor is None or not cursor.startswith("_GET_stream_"):
            raise LabError(f"expected a _GET_stream_ id, got {cursor}")

        async with client.get_stream(cursor) as resumed:
            later_id, sent = await server.notify_sent(session, LATER)
            with anyio.move_on_after(QUIET_S):
                await resumed.next_event()
            if resumed.events:
                raise LabError(f"the resume carried events: {resumed.events}")
        ctx.note("later_event_id", later_id)
        ctx.note("later_sent", sent)
        if sent:
            raise LabError("the later alert found a connection")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(ctx, _drive, bug="split-stream-id", session_prefix="split")


SCENARIO = Scenario(
    name="split-stream-id",
    description="a standalone-stream resume replays nothing; later notifications are dropped",
    run=run,
    expected_path=Path(__file__).with_name("split_stream_id.expected.json"),
)
