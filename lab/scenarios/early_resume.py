"""early-resume: the server closes a stream after `retry: 2000`; the client is back in ~100 ms.

One `lab.faults.server` with `--retry-ms 2000` (priming events carry `retry: 2000`) and
`--close-after 2` (the server ends the first streamed call's response after progress 2; the tool
runs on into the buffer). On the wire (2025-11-25):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming, `retry: 2000`), e2, e3 (progress 1, 2); then the server ends the response cleanly.
   e4, e5 (progress 3, 4) and e6 (the result) go into the buffer only.
3. The client waits 100 ms, not the 2000 ms the stream asked for, and resumes with `GET` +
   `Last-Event-ID: e3`: the server replays e4, e5, e6 and ends the response.
4. `DELETE` ends the session.

Expected: retry-violation (request 3's stream closed by the server after `retry: 2000`, resumed
from e3 about 100 ms later).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import call_until_server_ends, end_session, run_behind_proxy

RETRY_MS = 2000
CLOSE_AFTER = 2
REPORT = {"steps": 4}
# The scenario's very point, not a race: the client resumes after a fixed 100 ms although the
# stream said `retry: 2000`. Anything well under 1800 ms (retry less 10% tolerance) shows the
# fault; the wait starts once the client has seen the response end.
EARLY_WAIT_S = 0.1


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-early-resume")
        call_id, events, cursor = await call_until_server_ends(ctx, client, report=REPORT)
        retries = [e.retry for e in events if e.retry is not None]
        if retries != [RETRY_MS] or cursor != "e3":
            raise LabError(f"expected retry {RETRY_MS} and cursor e3, got {retries}, {cursor}")

        await anyio.sleep(EARLY_WAIT_S)  # too early: the stream asked for 2000 ms
        async with client.get_stream(cursor) as resumed:
            await resumed.response_message(call_id)
            replayed = [e.id for e in resumed.events]
        ctx.note("replayed_event_ids", replayed)
        if replayed != ["e4", "e5", "e6"]:
            raise LabError(f"expected the replay e4..e6, got {replayed}")
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="early-resume",
        session_prefix="early",
        retry_ms=RETRY_MS,
        close_after=CLOSE_AFTER,
    )


SCENARIO = Scenario(
    name="early-resume",
    description="the server closes a stream after retry: 2000; the client resumes in 100 ms",
    run=run,
    expected_path=Path(__file__).with_name("early_resume.expected.json"),
)
