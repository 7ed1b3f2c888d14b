"""response-on-get: the server answers a POSTed request with 202 and its response on the GET stream.

One `lab.faults.server` with `--response-on-get`. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. GET without a cursor opens the standalone stream: e1 (priming), e2 (a
   `notifications/message` saying the stream opened).
3. `tools/call lookup {"key": "colour"}` (id 3, no progress token): the server answers the POST
   with 202 and no body, and sends the JSON-RPC result of id 3 as e3 on the standalone GET
   stream, which resumes no request's stream.
4. The client reads its response off the GET stream, closes it, and `DELETE` ends the session.

Expected: response-on-get-stream (request 3's response, e3, on a GET stream opened without a
cursor). lost-response must not fire: the response did reach the client in its session.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, run_behind_proxy

CALL_ID = 3  # initialize is 1, tools/list 2; checked against the run
RESPONSE_EVENT = "e3"  # e1, e2: the GET stream's priming event and its notification


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-response-on-get")
        await client.initialize()
        ctx.note("session", client.session_id)
        await client.request("tools/list")
        async with client.get_stream() as stream:
            await stream.until(lambda event: event.message is not None)  # the stream is live
            call_id: int = client.next_id()
            body = {
                "jsonrpc": "2.0",
                "id": call_id,
                "method": "tools/call",
                "params": {"name": "lookup", "arguments": {"key": "colour"}},
            }
            async with client.post(body) as call:
                await call.response.aread()
                post_status, post_body = call.status, call.response.text
            response = await stream.until(
                lambda e: (m := e.message) is not None and "method" not in m
            )
            stream_ids = [event.id for event in stream.events]
        ctx.note("call_id", call_id)
        ctx.note("post_status", post_status)
        ctx.note("get_event_ids", stream_ids)
        ctx.note("response_event_id", response.id)
        message = response.message
        assert message is not None
        if post_status != 202 or post_body:
            raise LabError(f"the POST answered {post_status} {post_body!r}, not an empty 202")
        if message.get("id") != call_id or "result" not in message:
            raise LabError(f"the GET stream carried {message}, not the result of {call_id}")
        if (call_id, response.id) != (CALL_ID, RESPONSE_EVENT):
            raise LabError(
                f"request {call_id} answered as {response.id}; expected.json names "
                f"{CALL_ID} and {RESPONSE_EVENT}"
            )
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="response-on-get",
        session_prefix="rog",
        response_on_get=True,
    )


SCENARIO = Scenario(
    name="response-on-get",
    description="a POSTed request is answered 202; its response comes on the standalone GET stream",
    run=run,
    expected_path=Path(__file__).with_name("response_on_get.expected.json"),
)
