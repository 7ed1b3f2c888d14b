"""replaced-resume: a second resume with the same Last-Event-ID silently replaces the first.

Reproduces punkpeye/fastmcp #331 (`handleReplayEvents` registered the resumed connection under
the stream's id without checking for a live one, so a second resume overwrote the first: the
first connection got no more bytes, no close, no signal): one `lab.faults.bugs --bug
replace-resume --pause-after 2`. What differs from the report: the stream is a tool call's
rather than the edge transport's, and the lab holds the tool (`/lab/release`, off the wire)
until both resumes are in, so the order is deterministic. On the wire (2025-11-25, raw httpx
client):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 4}` (id 3, with a progress token) answers SSE: e1
   (priming), e2, e3 (progress 1, 2); then the client's connection drops. The tool waits.
3. `GET` + `Last-Event-ID: e3` (resume A): 200, nothing to replay yet; A stays open.
4. The client, having seen nothing on A, resumes again with the same cursor (resume B): 200.
   The server attaches B in A's place and leaves A open.
5. The tool goes on: e4, e5 (progress 3, 4) and e6 (the result) arrive on B only. A carries
   nothing more and is never closed by the server; the client closes it after a while.
6. `DELETE` ends the session.

Expected: orphaned-incarnation (A, incarnation 1 of request 3's stream, left live and silent
by B's resume).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from lab.clients.raw import SessionedClient
from lab.framework import LabContext, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session
from lab.scenarios._sdk_bug import BugReplica, run_bug_behind_proxy

REPORT = {"steps": 4}
CURSOR = "e3"
QUIET_S = 0.3  # how long the client waits on A before resuming again
ORPHANED_S = 1.5  # how long A stays open after B's answer


async def _drive(ctx: LabContext, server: BugReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-replaced-resume")
        call_id = await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        async with client.get_stream(CURSOR):  # resume A
            # Not read while open: cancelling a read would close the connection (httpx).
            await anyio.sleep(QUIET_S)
            async with client.get_stream(CURSOR) as second:  # resume B
                await server.release()
                await second.response_message(call_id)
                ctx.note("second_event_ids", [e.id for e in second.events])
            # A stays open, unread; the capture shows that it got nothing.
            await anyio.sleep(ORPHANED_S)
        await end_session(client)


def run(ctx: LabContext) -> None:
    run_bug_behind_proxy(
        ctx, _drive, bug="replace-resume", session_prefix="replaced", pause_after=2
    )


SCENARIO = Scenario(
    name="replaced-resume",
    description="a second resume with the same Last-Event-ID silently replaces the first",
    run=run,
    expected_path=Path(__file__).with_name("replaced_resume.expected.json"),
)
