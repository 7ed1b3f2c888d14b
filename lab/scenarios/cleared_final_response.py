"""cleared-final-response: the final tool response is cleared from the store before a resume.

Reproduces cloudflare/agents #1607 (its first fix: the final response was stored and the stream
cleared at once, so a client that lost the connection mid-flight resumed into nothing): one
`lab.faults.bugs --bug clear-final --pause-after 2`. What differs from the report: the lab's
server is a Python process with an in-memory buffer rather than a Durable Object, and its empty
answer ends at once. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming), e2, e3 (progress 1, 2). With e3 in hand the client's connection drops.
3. The tool runs on while the client is away (disconnection is not cancellation): e4, e5
   (progress 3, 4) and e6 (the result) go into the buffer; issuing e6 clears the whole stream.
4. The client resumes with `GET` + `Last-Event-ID: e3`. The server finds nothing and answers
   200 with an empty stream. The result of request 3 never comes; `DELETE` ends the session.

Expected: lost-response (request 3 was never answered on the wire). Also true, so allowed:
causal-gap (the stream owed its result after e3 at the end of its chain).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session
from lab.scenarios._sdk_bug import BugReplica, run_bug_behind_proxy

REPORT = {"steps": 4}
CURSOR = "e3"


async def _drive(ctx: LabContext, server: BugReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-cleared-final")
        await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        state = await server.settle()  # the tool finished while the client was away
        ctx.note("buffer_at_resume", state["buffers"][client.session_id])
        async with client.get_stream(CURSOR) as resumed:
            while await resumed.next_event() is not None:
                pass
        ctx.note("resume_event_ids", [e.id for e in resumed.events])
        if resumed.events:
            raise LabError(f"the resume carried events: {resumed.events}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(ctx, _drive, bug="clear-final", session_prefix="cleared", pause_after=2)


SCENARIO = Scenario(
    name="cleared-final-response",
    description="the final tool response is cleared from the store before it can be replayed",
    run=run,
    expected_path=Path(__file__).with_name("cleared_final_response.expected.json"),
)
