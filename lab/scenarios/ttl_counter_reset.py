"""ttl-counter-reset: the stream's buffer is collected on a TTL; the resume restarts the ids.

One `lab.faults.server` whose per-session buffers (and the `e<n>` counter inside them) are
collected 0.3 s after their last event once nothing of theirs is live (`--buffer-ttl 0.3`);
the session itself lives on in the session store. On the wire (2025-11-25):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming), e2, e3 (progress 1, 2). With e3 in hand the client closes the connection.
3. The tool runs on while the client is away: e4, e5 (progress 3, 4) and e6 (the result) go
   into the buffer; 0.3 s later the TTL collects that buffer (the scenario waits for the
   server to say so, it does not sleep).
4. The client resumes with `GET` + `Last-Event-ID: e3`. A new buffer starts the counter again:
   the server answers 200 with e1 (priming) and e2 (a `notifications/message`) under the old
   cursor. Progress 3, 4 and the result of request 3 never reach the client, and e2 now names
   a second, different payload. The client closes the stream once e2 arrived.
5. `DELETE` ends the session.

Expected: counter-reset (the stream's ids go e3 -> e1, e2), and causal-gap or lost-response
(after e3 nothing of request 3's stream came, its result included). Allowed as also true:
duplicate-event-id (e2 issued twice with different payloads) and phantom-resume (fresh ids
where a replay was due).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session, run_behind_proxy

BUFFER_TTL_S = 0.3
REPORT = {"steps": 4}
CURSOR = "e3"


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-ttl")
        await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        state = await server.settle(collected=True)
        ctx.note("collected_buffers", state["collected"])

        async with client.get_stream(CURSOR) as resumed:
            event = await resumed.until(lambda event: event.message is not None)
            if event.message is None or "id" in event.message:
                raise LabError(f"expected a fresh notification on the resume, got {event}")
            ctx.note("resume_event_ids", [e.id for e in resumed.events])
        if [e.id for e in resumed.events] != ["e1", "e2"]:
            raise LabError(f"the counter did not restart: {resumed.events}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="ttl",
        session_prefix="ttl",
        buffer_ttl=BUFFER_TTL_S,
        pause_after=2,
    )


SCENARIO = Scenario(
    name="ttl-counter-reset",
    description="a TTL collects the stream's buffer; the resume restarts the event counter",
    run=run,
    expected_path=Path(__file__).with_name("ttl_counter_reset.expected.json"),
)
