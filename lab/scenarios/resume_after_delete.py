"""resume-after-delete: the session is DELETEd (200) and the server goes on serving it.

One `lab.faults.server` started with `--ignore-delete`: DELETE answers 200 but the session stays
in the store, so later requests carrying it are still served. `--pause-after 1` holds the tool
after its first progress notification until the client has left (so the drop point is exact).
On the wire (2025-11-25):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 3}` (id 3, with a progress token) answers SSE: e1
   (priming), e2 (progress 1). With e2 in hand the client closes the connection; the tool runs
   on into the buffer: e3, e4 (progress 2, 3), e5 (the result).
3. `DELETE` with the session id: answered 200. The session is over for the client.
4. The client still resumes request 3's stream with `GET` + `Last-Event-ID: e2` under the old
   `Mcp-Session-Id`: answered 200, replaying e3, e4, e5.
5. A `ping` (id 4) under the old `Mcp-Session-Id`: answered 200.

Expected: resume-after-termination (the resume from e2 and request 4 accepted after the DELETE).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import ClientError, SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import drop_call_at, end_session, run_behind_proxy

REPORT = {"steps": 3}
CURSOR = "e2"


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-resume-after-delete")
        call_id = await drop_call_at(ctx, client, report=REPORT, cursor=CURSOR)
        await server.settle()  # the tool ran to its end while the client was away
        await end_session(client)  # answered 200: the session is over

        # The client keeps the old session id and cursor; the faulty server still serves them.
        async with client.get_stream(CURSOR) as resumed:
            await resumed.response_message(call_id)
            replayed = [e.id for e in resumed.events]
        ctx.note("replayed_after_delete", replayed)
        if replayed != ["e3", "e4", "e5"]:
            raise LabError(f"expected the replay e3..e5 after the DELETE, got {replayed}")
        try:
            await client.request("ping")
        except ClientError as exc:
            raise LabError(f"the ping after the DELETE was refused: {exc}") from exc
        ctx.note("ping_after_delete", "accepted")


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="ignore-delete",
        session_prefix="deleted",
        pause_after=1,
        ignore_delete=True,
    )


SCENARIO = Scenario(
    name="resume-after-delete",
    description="a DELETEd session is still served: a resume and a ping answered 200 after it",
    run=run,
    expected_path=Path(__file__).with_name("resume_after_delete.expected.json"),
)
