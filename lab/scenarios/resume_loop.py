"""resume-loop: every resume of a tool's stream brings a new priming event and nothing else.

One `lab.faults.server` with `--close-after 1` (the server ends the first streamed call's
response after progress 1; the tool runs on into the buffer) and `--stall-resumes` (a resume of
a buffered stream answers 200 with only a new priming event on that stream, then ends: nothing
is replayed). On the wire (2025-11-25, raw httpx client, no `retry:` field anywhere):

1. `initialize` (id 1, JSON), `notifications/initialized` (202), `tools/list` (id 2, JSON).
2. `tools/call slow_report {"steps": 3}` (id 3, with a progress token) answers SSE: e1
   (priming), e2 (progress 1); then the server ends the response cleanly. e3, e4 (progress 2, 3)
   and e5 (the result) go into the buffer only.
3. The client resumes that stream five times, each `GET` carrying the last id it got:
   `Last-Event-ID: e2` answers e6 (priming only), e6 answers e7, e7 e8, e8 e9, e9 e10. The result
   of request 3 never comes; the client gives up.
4. `DELETE` ends the session.

Expected: resume-loop (five fruitless resumes of request 3's stream while its response is owed).
Also true of this traffic, so allowed: lost-response (request 3's response never reached the
client), phantom-resume (each resume answered 200 while messages were due, with none of them
and no sign the cursor was not honoured) and causal-gap (the messages owed on the stream after
e2 never reached the client at the end of its chain).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import FaultReplica
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import call_until_server_ends, end_session, run_behind_proxy

CLOSE_AFTER = 1
REPORT = {"steps": 3}
RESUMES = 5


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-resume-loop")
        _, _, last = await call_until_server_ends(ctx, client, report=REPORT)
        if last != "e2":
            raise LabError(f"expected the call's stream to end at e2, got {last}")
        cursor: str = last

        cursors: list[str] = []
        answers: list[list[str | None]] = []
        for _ in range(RESUMES):
            cursors.append(cursor)
            async with client.get_stream(cursor) as resumed:
                while await resumed.next_event() is not None:
                    pass  # the server ends each answer
            answers.append([e.id for e in resumed.events])
            if any(e.data for e in resumed.events):
                raise LabError(f"resume from {cursor} brought a message: {resumed.events}")
            cursor = resumed.last_event_id or cursor
        ctx.note("resume_cursors", cursors)
        ctx.note("resume_answers", answers)
        if cursors != ["e2", "e6", "e7", "e8", "e9"]:
            raise LabError(f"unexpected resume cursors {cursors}")
        await end_session(client)  # the client gives up


def run(ctx: LabContext) -> None:
    run_behind_proxy(
        ctx,
        _drive,
        replica="resume-loop",
        session_prefix="loop",
        close_after=CLOSE_AFTER,
        stall_resumes=True,
    )


SCENARIO = Scenario(
    name="resume-loop",
    description="five resumes of a tool's stream each bring only a new priming event",
    run=run,
    expected_path=Path(__file__).with_name("resume_loop.expected.json"),
)
