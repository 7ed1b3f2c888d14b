"""ring-buffer-eviction: the resume replays only what a bounded buffer kept.

One `lab.faults.server` with a ring buffer of 4 events per session (`--buffer-size 4`); ids
`e<n>` from its counter. On the wire (2025-11-25):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 8}` (id 3, with a progress token) answers SSE: e1
   (priming), e2..e4 (progress 1..3). With e4 in hand the client closes the connection.
3. While the client is away the tool runs on (disconnection is not cancellation): e5..e9
   (progress 4..8) and e10 (the result) go into the buffer, which keeps only e7..e10.
4. The client resumes with `GET` + `Last-Event-ID: e4`. The server does not notice that e4 and
   everything up to e6 are gone: it replays the surviving tail e7, e8, e9, e10 and ends the
   response. Progress 4 and 5 (e5, e6) never reach the client.
5. `DELETE` ends the session.

Expected: causal-gap (after cursor e4 of request 3's stream the replay starts at e7).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session, run_behind_proxy

BUFFER_SIZE = 4
REPORT = {"steps": 8}
CURSOR = "e4"


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-ring-buffer")
        call_id = await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        state = await server.settle()  # the tool ran to its end while the client was away
        ctx.note("buffer_at_resume", state["buffers"][client.session_id])

        async with client.get_stream(CURSOR) as resumed:
            await resumed.response_message(call_id)
            if await resumed.next_event() is not None or not resumed.ended:
                raise LabError("the replay went on after the result")
            replayed = [e.id for e in resumed.events]
        ctx.note("replayed_event_ids", replayed)
        progress = [
            e.message["params"]["progress"]
            for e in resumed.events
            if e.message is not None and e.message.get("method") == "notifications/progress"
        ]
        ctx.note("replayed_progress", progress)
        if replayed[0] != "e7":
            raise LabError(f"expected the surviving tail from e7, got {replayed}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="ring-buffer",
        session_prefix="ring",
        buffer_size=BUFFER_SIZE,
        pause_after=3,
    )


SCENARIO = Scenario(
    name="ring-buffer-eviction",
    description="a bounded event buffer evicts part of the tail; the resume replays the rest",
    run=run,
    expected_path=Path(__file__).with_name("ring_buffer_eviction.expected.json"),
)
