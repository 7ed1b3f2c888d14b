"""replayed-twice: a response completed while its stream was away is replayed, then written again.

Reproduces the typescript-sdk #2547 review (`send()` stores the response, a resume replays it
from the store while `send()` is parked on the store call, then `send()` resumes, finds the
resumed connection and writes the same event again): one `lab.faults.bugs --bug replay-twice
--pause-after 2`. What differs from the report: the race is made deterministic (the server
always writes the stored response a second time after the replay), on a request's stream rather
than the standalone one. On the wire (2025-11-25, raw httpx client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming), e2, e3 (progress 1, 2); then the client's connection drops.
3. The tool finishes while the client is away: e4, e5 (progress 3, 4) and e6 (the result) are
   stored.
4. `GET` + `Last-Event-ID: e3` replays e4, e5, e6, then e6 again (the same result, the same
   event id), and ends. `DELETE` ends the session.

Expected: double-delivery (request 3's response carried twice on the resume's response).
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
        client = SessionedClient(http, url, client_name="seamwatch-lab-replayed-twice")
        await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        await server.settle()  # the tool finished while the client was away
        async with client.get_stream(CURSOR) as resumed:
            while await resumed.next_event() is not None:
                pass
        replayed = [e.id for e in resumed.events]
        ctx.note("resume_event_ids", replayed)
        if replayed != ["e4", "e5", "e6", "e6"]:
            raise LabError(f"expected e4, e5, e6 and e6 again, got {replayed}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(ctx, _drive, bug="replay-twice", session_prefix="twice", pause_after=2)


SCENARIO = Scenario(
    name="replayed-twice",
    description="a response stored while its stream was away is replayed, then written again",
    run=run,
    expected_path=Path(__file__).with_name("replayed_twice.expected.json"),
)
