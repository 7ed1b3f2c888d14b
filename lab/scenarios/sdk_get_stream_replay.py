"""sdk-get-stream-replay: resuming an old GET stream's cursor replays a newer GET stream's event.

The mcp 2.3 SDK stores every standalone GET stream of a session under one event-store key
(`"_GET_stream"`), so the lab event store cannot tell GET stream 1 from GET stream 2: a resume
of stream 1's cursor replays what stream 2 carried. On the wire (2025-11-25, raw httpx client,
SDK server with the lab event store, counter ids):

1. `initialize` (priming 1, result 2), `notifications/initialized`, `tools/list` (3, 4: the
   analysis learns that `drop_standalone_stream`, called twice below, is read-only).
2. GET stream 1 (no cursor). `announce`: its `notifications/message` arrives on stream 1 as
   event 6 (5 and 7 are the announce POST's priming event and result).
3. `drop_standalone_stream` (priming 8, result 9): the server closes stream 1.
4. GET stream 2 (no cursor) replaces stream 1. `announce` again: event 11 on stream 2 (10 and
   12 on its POST); `drop_standalone_stream` (13, 14): the server closes stream 2 as well.
5. Once the server no longer listens on a standalone stream (read off `/lab/state`), a GET with
   `Last-Event-ID: 6`, stream 1's cursor: the SDK replays event 11, first sent on stream 2, on
   this incarnation of stream 1, then a fresh priming event (15) and keeps it open as the new
   standalone stream. The client closes it once the priming event came, then DELETE.

Expected: cross-stream-replay (event 11 on an incarnation of stream 1) and superseded-stream
(the cursor of stream 1 resumed after stream 2 replaced it); evidence the resumed cursor and the
replayed event. duplicate-response is allowed: DESIGN.md §5's row ("one message delivered on two
logical streams") covers event 11, but its detector leaves replays on another stream's resume
to cross-stream-replay.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient, SseStream, wait_until
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

STREAM1_CURSOR = "6"  # stream 1's only event, resumed at the end; checked against the run
STREAM2_EVENT = "11"  # stream 2's only event, replayed onto stream 1; checked as well


async def _announce_and_drop(client: SessionedClient, stream: SseStream, text: str) -> str:
    """One announcement on the open GET stream, then the server closes it; the event's id."""
    await client.call_tool("announce", {"text": text})
    event = await stream.next_event()
    if event is None or event.id is None or event.message is None:
        raise LabError(f"no announcement on the GET stream: {event}")
    await client.call_tool("drop_standalone_stream", {})
    if await stream.next_event() is not None:
        raise LabError("the GET stream carried more than its announcement")
    return event.id


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    async with httpx.AsyncClient(timeout=ctx.remaining()) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-get-replay-client")
        await client.initialize()
        await client.request("tools/list")
        session = client.session_id

        async def not_listening() -> bool:
            return session not in (await server.state())["standalone_listeners"]

        async with client.get_stream() as stream1:
            cursor = await _announce_and_drop(client, stream1, "stream 1: first")
        async with client.get_stream() as stream2:
            stream2_id = await _announce_and_drop(client, stream2, "stream 2: second")
        # The resume must find no standalone stream registered: then the SDK keeps it open.
        await wait_until(not_listening, timeout=ctx.remaining())
        async with client.get_stream(last_event_id=cursor) as resumed:
            # The replay, then the SDK's fresh priming event (id only): the stream is live.
            await resumed.until(lambda event: event.message is None)
            resumed_ids = [event.id for event in resumed.events]
            replayed = [event.id for event in resumed.events if event.message is not None]
        if await client.delete() != 200:
            raise LabError("DELETE failed")
    store = (await server.state())["event_store"]
    ctx.note("session", session)
    ctx.note("stream1_event_ids", [cursor])
    ctx.note("stream2_event_ids", [stream2_id])
    ctx.note("resumed_cursor", cursor)
    ctx.note("resume_event_ids", resumed_ids)
    ctx.note("resume_replayed", replayed)
    ctx.note("store_replays", store["replays"])
    if cursor != STREAM1_CURSOR or stream2_id != STREAM2_EVENT:
        raise LabError(
            f"stream 1 ended at {cursor!r}, stream 2 carried {stream2_id!r}; expected.json "
            f"names {STREAM1_CURSOR!r} and {STREAM2_EVENT!r}"
        )
    if replayed != [STREAM2_EVENT]:
        raise LabError(f"the resume of {cursor} replayed {replayed}, not stream 2's event")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="counter")
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="sdk-get-stream-replay",
    description="the SDK replays a newer GET stream's event onto an old GET stream's resume",
    run=run,
    expected_path=Path(__file__).with_name("sdk_get_stream_replay.expected.json"),
)
