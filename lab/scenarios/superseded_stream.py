"""superseded-stream: a cursor of a replaced standalone GET stream is resumed.

On the wire (2025-11-25, raw httpx client, SDK server with the lab event store, counter ids):

1. `initialize` (priming 1, result 2), `notifications/initialized`.
2. GET stream 1 (no cursor). `announce` twice: `notifications/message` events 4 and 7 arrive on
   stream 1 (3, 5, 6 and 8 are the announce POSTs' priming events and results).
3. `drop_standalone_stream` (priming 9, result 10): the server closes stream 1.
4. GET stream 2 without `Last-Event-ID`: a new standalone stream replaces stream 1 (the SDK
   accepts it because stream 1 is gone; while one is open it answers a second GET with 409).
5. Once the server listens on stream 2 (read off the wire from `/lab/state`), a GET with
   `Last-Event-ID: 7`, stream 1's last cursor, while stream 2 is open: the SDK (one store key,
   "_GET_stream", for every standalone stream of a session) finds no later event and, since
   stream 2 holds the live tail, answers 200 with an empty replay and ends.
6. `announce` once more: its event arrives on stream 2, the live stream. Stream 2 is closed by
   the client, then DELETE.

Expected: superseded-stream, evidence the resumed cursor.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient, wait_until
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

SUPERSEDED_CURSOR = "7"  # stream 1's last event id; checked against the run below


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    async with httpx.AsyncClient(timeout=ctx.remaining()) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-superseded-client")
        await client.initialize()
        session = client.session_id

        async def listening() -> bool:
            return session in (await server.state())["standalone_listeners"]

        async with client.get_stream() as stream1:
            stream1_ids = []
            for text in ("first", "second"):
                await client.call_tool("announce", {"text": f"stream 1: {text}"})
                event = await stream1.next_event()
                if event is None or event.id is None:
                    raise LabError(f"no event on GET stream 1: {event}")
                stream1_ids.append(event.id)
            await client.call_tool("drop_standalone_stream", {})
            if await stream1.next_event() is not None:
                raise LabError("GET stream 1 carried more than the two announcements")
        cursor = stream1_ids[-1]

        async with client.get_stream() as stream2:
            await wait_until(listening, timeout=ctx.remaining())
            async with client.get_stream(last_event_id=cursor) as resumed:
                while await resumed.next_event() is not None:
                    pass
                replayed = [event.id for event in resumed.events]
            await client.call_tool("announce", {"text": "stream 2: third"})
            event = await stream2.next_event()
            if event is None or event.id is None:
                raise LabError("no event on GET stream 2")
            stream2_ids = [event.id]
        if await client.delete() != 200:
            raise LabError("DELETE failed")
    ctx.note("session", session)
    ctx.note("stream1_event_ids", stream1_ids)
    ctx.note("stream2_event_ids", stream2_ids)
    ctx.note("superseded_cursor", cursor)
    ctx.note("resume_replayed", replayed)
    if cursor != SUPERSEDED_CURSOR:
        raise LabError(f"resumed cursor {cursor!r}, expected.json names {SUPERSEDED_CURSOR!r}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="counter")
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="superseded-stream",
    description="a new GET stream replaces the standalone stream; an old cursor is resumed",
    run=run,
    expected_path=Path(__file__).with_name("superseded_stream.expected.json"),
)
