"""answered-twice: the server runs a tool twice and answers one request with two results.

One `lab.faults.server` with `--answer-twice` (the first streamed tool call runs its tool again
after the first result and sends the second result on the same stream, same request id). On the
wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call create_ticket {"title": "printer on fire", "steps": 1}` (id 3, with a progress
   token) answers SSE: e1 (priming), e2 (progress 1), e3 (the result of id 3: "filed ticket
   T-1"), e4 (a second result of id 3: "filed ticket T-2"); then the server ends the response.
   The client reads it to its end. Two tickets were filed for one request.
3. `DELETE` ends the session.

Expected: duplicate-response (request 3 answered with two different results, e3 and e4).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica, progress_call
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import end_session, open_session, run_behind_proxy

TICKET = {"title": "printer on fire", "steps": 1}
CALL_ID = 3  # initialize is 1, tools/list 2; checked against the run
ANSWERS = ["e3", "e4"]  # e1, e2: the priming event and progress 1


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-answered-twice")
        await open_session(ctx, client)
        call_id: int = client.next_id()
        async with client.post(progress_call(call_id, "create_ticket", TICKET)) as call:
            while await call.next_event() is not None:
                pass  # read until the server ends the response
        answers = [
            (e.id, m)
            for e in call.events
            if (m := e.message) is not None and "method" not in m and m.get("id") == call_id
        ]
        texts = [m["result"]["content"][0]["text"] for _, m in answers]
        ctx.note("call_id", call_id)
        ctx.note("call_event_ids", [e.id for e in call.events])
        ctx.note("answer_event_ids", [event_id for event_id, _ in answers])
        ctx.note("answer_texts", texts)
        tickets = (await server.state())["tickets"]
        ctx.note("tickets", tickets)
        if (call_id, [event_id for event_id, _ in answers]) != (CALL_ID, ANSWERS):
            raise LabError(f"request {call_id} answered as {answers}; expected {ANSWERS}")
        if len(set(texts)) != 2 or tickets != 2:
            raise LabError(f"expected two different results and two tickets: {texts}, {tickets}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx, _drive, replica="answered-twice", session_prefix="twice", answer_twice=True
    )


SCENARIO = Scenario(
    name="answered-twice",
    description="the server runs a tool twice and answers one request with two different results",
    run=run,
    expected_path=Path(__file__).with_name("answered_twice.expected.json"),
)
