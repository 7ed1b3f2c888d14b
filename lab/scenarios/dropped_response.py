"""dropped-response: the resume replays what survived, but the tool's result was never issued.

One `lab.faults.server` with `--pause-after 2` (the first streamed call waits after progress 2
until the client's connection is gone, then runs on into the buffer) and `--drop-response` (that
call's stream finishes without its result: the server never issues it). On the wire
(2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming), e2, e3 (progress 1, 2). With e3 in hand the client closes the connection.
3. While the client is away the tool runs on: e4, e5 (progress 3, 4) go into the buffer; the
   stream then counts as finished, but no result is issued.
4. The client resumes with `GET` + `Last-Event-ID: e3`: the server replays e4, e5 and ends the
   response. The result of request 3 came nowhere in the session; the client gives up.
5. `DELETE` ends the session.

Expected: lost-response (request 3 accepted, no response by the end of its incarnation chain).
Also true of this traffic, so allowed: causal-gap, whose "owed" part flags a resumed request
stream whose response never arrived (the replay itself, e4 and e5, is contiguous).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session, run_behind_proxy

PAUSE_AFTER = 2
REPORT = {"steps": 4}
CURSOR = "e3"
CALL_ID = 3  # initialize is 1, tools/list 2; checked against the run


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-dropped-response")
        call_id = await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        state = await server.settle()  # the tool ran to its end while the client was away
        ctx.note("buffer_at_resume", state["buffers"][client.session_id])

        async with client.get_stream(CURSOR) as resumed:
            while await resumed.next_event() is not None:
                pass  # the server ends the replay
        replayed = [e.id for e in resumed.events]
        ctx.note("call_id", call_id)
        ctx.note("replayed_event_ids", replayed)
        answered = [
            e.id
            for e in resumed.events
            if (m := e.message) is not None and "method" not in m and m.get("id") == call_id
        ]
        if call_id != CALL_ID or replayed != ["e4", "e5"] or answered:
            raise LabError(
                f"expected request {CALL_ID}'s replay e4, e5 without a result, got "
                f"request {call_id}, {replayed}, answers {answered}"
            )
        await end_session(client)  # the client gives up


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="dropped-response",
        session_prefix="drop",
        pause_after=PAUSE_AFTER,
        drop_response=True,
    )


SCENARIO = Scenario(
    name="dropped-response",
    description="a broken tool call is resumed; the replay ends, but its result was never sent",
    run=run,
    expected_path=Path(__file__).with_name("dropped_response.expected.json"),
)
