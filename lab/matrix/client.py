"""Drive one matrix variant through the proxy, as a correct client would (raw HTTP, httpx).

The client reads the stream up to the cut (the priming event and `seen` messages), closes the
connection, and resumes with `Last-Event-ID` (the last id it read, or the one before when it had
not handled the last message); when the server ends the stream instead, it reads to the end
and waits the `retry:` it got before each resume (or, for the early cut, resumes at once the
first time). It acts on what it gets, never on the variant's answer: an event
stream is read to its end, and resumed again from its latest id while it brings no message (up
to five times, then the client gives up); a `stream-reset` control event or a 400 makes it
cancel the call and re-issue it (or open a new GET stream without a cursor); a 409 makes it
cancel and re-issue; a 404 makes it re-initialize and start over in the new session. In
2026-07-28 it closes the cut stream (a cancellation there) and re-issues the call under a new
id. Sessions end with DELETE.

In the families (`lab.matrix.variants.FAMILIES`) the client makes the fault, or meets it:
before its resume it DELETEs the session (`after-delete`) or opens a newer GET stream and
reads its first message (`superseded`); or, instead of resuming, it re-initializes and sends
its old cursor on a GET in the new session (`carried-cursor`, a legacy client's habit); or it
opens the GET stream first, calls the tool, reads the call's stream to its end and waits for
the response on the GET stream (`response-on-get`).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from lab.clients.raw import ClientError, ModernClient, SessionedClient, SseStream
from lab.matrix.server import RESET_EVENT
from lab.matrix.variants import MODERN_ERA, Variant

#: Resumes a client makes while answers bring no message (DESIGN.md §5 `resume-loop` counts 5).
RESUME_TRIES = 5


def arguments(v: Variant) -> dict[str, Any]:
    """The call's arguments: the variant's name in them keeps variants' calls apart."""
    if v.side_effecting:
        return {"title": f"ticket of {v.name}"}
    return {"steps": v.seen, "label": v.name}


def call_params(v: Variant, token: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": v.tool, "arguments": arguments(v)}
    if v.progress != "none":
        params["_meta"] = {"progressToken": token}
    return params


async def read_to_cut(stream: SseStream, v: Variant) -> None:
    """Read the priming event (when the era has one) and `seen` messages."""
    primed = not v.priming
    messages = 0
    while not (primed and messages >= v.seen):
        event = await stream.next_event()
        if event is None:
            raise ClientError(f"the stream ended before the cut: {stream.events}")
        if event.message is None:
            primed = True
        else:
            messages += 1


def cursor_of(stream: SseStream, v: Variant) -> str:
    ids = [event.id for event in stream.events if event.id]
    if not ids:
        raise ClientError("no event id before the cut")
    return ids[-1] if v.cursor == "last" or len(ids) < 2 else ids[-2]


async def drive(http: httpx.AsyncClient, url: str, v: Variant) -> None:
    """Play variant `v` against the MCP endpoint `url`."""
    if v.era == MODERN_ERA:
        await _drive_modern(http, url, v)
        return
    client = SessionedClient(http, url, client_name=v.name, version=v.era)
    await client.initialize()
    await client.request("tools/list")
    if v.answer == "response-on-get":
        await _response_on_get(client, v)
        return
    call_id = client.next_id()
    if v.owed:
        body = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call"}
        body["params"] = call_params(v, f"{v.name}-1")
        async with client.post(body) as stream:
            await read_to_cut(stream, v)
            await _read_to_end_if_server_cuts(stream, v)
    else:
        async with client.get_stream() as stream:
            await read_to_cut(stream, v)
            await _read_to_end_if_server_cuts(stream, v)
    cursor = cursor_of(stream, v)
    retry = next((e.retry for e in reversed(stream.events) if e.retry is not None), None)
    if v.answer == "carried-cursor":
        await client.initialize()  # a new session; the client kept its cursor
        answer = await _resume(client, url, cursor)
        if answer.status != 400:
            raise ClientError(f"the carried cursor was answered {answer.status}")
        await client.delete()
        return
    if v.answer == "after-delete":
        await client.delete()
    elif v.answer == "superseded":
        async with client.get_stream() as newer:
            await newer.until(lambda event: event.message is not None)
    for attempt in range(RESUME_TRIES):
        if retry is not None and not (attempt == 0 and v.cut == "early"):
            await anyio.sleep(retry / 1000)  # the wait the server asked for
        answer = await _resume(client, url, cursor)
        if answer.status != 200 or any(e.message is not None for e in answer.events):
            break
        # Nothing but (perhaps) a new priming event: resume again from the latest id.
        cursor = answer.last_event_id or cursor
    reset = any(event.event == RESET_EVENT for event in answer.events)
    if answer.status == 404:
        await client.initialize()  # the session is gone: start over in a new one
        await client.request("tools/list")
        await _start_over(client, v, cancel=None)
    elif answer.status in (400, 409) or reset:
        await _start_over(client, v, cancel=call_id, new_get=answer.status != 409)
    elif answer.status != 200:
        raise ClientError(f"the resume answered {answer.status}")
    await client.delete()


async def _response_on_get(client: SessionedClient, v: Variant) -> None:
    """Open the GET stream, call the tool, and read its response wherever it comes."""
    async with client.get_stream() as get:
        await get.until(lambda event: event.message is not None)
        call_id = client.next_id()
        body = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call"}
        body["params"] = call_params(v, f"{v.name}-1")
        async with client.post(body) as stream:
            while await stream.next_event() is not None:
                pass
        await get.response_message(call_id)
    await client.delete()


async def _read_to_end_if_server_cuts(stream: SseStream, v: Variant) -> None:
    """When the server cuts, the client reads on until the response ends."""
    if v.cut != "client":
        while await stream.next_event() is not None:
            pass


async def _resume(client: SessionedClient, url: str, cursor: str) -> SseStream:
    """One resume (`GET` + `Last-Event-ID`), read to its end."""
    extra = {"accept": "text/event-stream", "last-event-id": cursor}
    request = client.http.build_request("GET", url, headers=client.headers(extra))
    response = await client.http.send(request, stream=True)
    try:
        answer = SseStream(response)
        if answer.status == 200 and answer.is_sse:
            while await answer.next_event() is not None:
                pass
        else:
            await response.aread()
    finally:
        await response.aclose()
    return answer


async def _start_over(
    client: SessionedClient, v: Variant, *, cancel: int | None, new_get: bool = True
) -> None:
    """After a resume the server refused: re-issue the call (cancelling the old one when the
    session lives on), or open a new GET stream without a cursor."""
    if not v.owed:
        if new_get:
            async with client.get_stream() as stream:
                await stream.until(lambda event: event.message is not None)
        return
    if cancel is not None:
        params = {"requestId": cancel, "reason": "stream lost"}
        await client.notify("notifications/cancelled", params)
    await client.request("tools/call", call_params(v, f"{v.name}-2"))


async def _drive_modern(http: httpx.AsyncClient, url: str, v: Variant) -> None:
    client = ModernClient(http, url, client_name=v.name)
    await client.request(1, "tools/list")
    params = call_params(v, "")
    params.pop("_meta", None)
    token = f"{v.name}-1" if v.progress != "none" else None
    async with client.post(client.body(2, "tools/call", params, progress_token=token)) as stream:
        await read_to_cut(stream, v)
    # Closing the stream cancelled the call (2026-07-28): the client sends it again, new id.
    token = f"{v.name}-2" if v.progress != "none" else None
    async with client.post(client.body(3, "tools/call", params, progress_token=token)) as stream:
        await stream.response_message(3)
