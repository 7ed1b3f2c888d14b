"""round-robin-replicas: a resume lands on the replica that never saw the stream.

Two `lab.faults.server` replicas, `replica-a` and `replica-b`, behind the round-robin
`lab.balancer`; sessions live in a shared SQLite file, event buffers and their `e<n>` counters
in each process. The proxy runs with `--replica-header X-Served-By`. The balancer sends HTTP
request k to replica k mod 2, so the order below fixes who answers what (each answer's
`X-Served-By` is checked):

1. `initialize` (id 1, JSON) -> a; `notifications/initialized` (202) -> b;
   `tools/list` (id 2, JSON) -> a; `ping` (id 3, JSON) -> b.
2. `tools/call create_ticket {"title": ..., "steps": 8}` (id 4, with a progress token) -> a:
   the ticket is filed, the SSE answer carries e1 (priming) and e2..e9 (progress 1..8). Once
   the client has e9 it closes the connection. Replica a, paused until then, finishes the call
   into its buffer: the result is e10, never sent.
3. The client resumes with `GET` + `Last-Event-ID: e7` (it commits its cursor only after
   handling an event, and e8, e9 were not handled yet) -> b. Replica b has no buffer for the
   session, so it answers 200 with a fresh stream under the old cursor: e1 (priming) and e2, a
   `notifications/message` -- an id replica a already issued with another payload. Neither
   progress 7, 8 nor the result comes, and nothing says the cursor was not honoured.
4. Believing the call lost, the client re-issues the same `create_ticket` with the same
   arguments (id 5) -> a: e11 (priming), e12..e19 (progress), e20 (result). Two tickets now.
5. `DELETE` -> b ends the session.

Expected: duplicate-event-id (e2), cross-replica-resume (cursor e7 from a, answered by b),
repeated-tool-call (4 then 5), phantom-resume or causal-gap (nothing after e7 ever came on the
stream of 4). Allowed as also true: counter-reset (the stream's ids run back from e7 to e1, e2)
and lost-response (4's result never reached the client).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import (
    MCP_PATH,
    FaultReplica,
    progress_call,
    served_by,
    start_balancer,
    start_replica,
)
from lab.framework import LabContext, LabError, Scenario

REPLICA_A, REPLICA_B = "replica-a", "replica-b"
TICKET = {"title": "disk full on db-2", "steps": 8}
CURSOR = "e7"


async def _drive(ctx: LabContext, replica_a: FaultReplica, url: str) -> None:
    placements: list[tuple[str, str]] = []

    def placed(what: str, response: httpx.Response, expected: str) -> None:
        placements.append((what, served_by(response)))
        ctx.note("placements", placements)
        if served_by(response) != expected:
            raise LabError(f"{what} was served by {served_by(response)}, not {expected}")

    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-round-robin")
        init = await client.initialize()  # initialize -> a, notifications/initialized -> b
        placed("initialize", init.response, REPLICA_A)
        ctx.note("session", client.session_id)
        _, listed = await client.request("tools/list")
        placed("tools/list", listed.response, REPLICA_A)
        _, pinged = await client.request("ping")
        placed("ping", pinged.response, REPLICA_B)

        first_id = client.next_id()
        async with client.post(progress_call(first_id, "create_ticket", TICKET)) as first:
            placed(f"tools/call {first_id}", first.response, REPLICA_A)
            await first.until(lambda event: event.id == "e9")
            ctx.note("first_call_event_ids", [e.id for e in first.events])
        # The connection is closed: a's paused call runs to its end into a's buffer.
        state = await replica_a.settle()
        ctx.note("replica_a_buffer", state["buffers"].get(client.session_id))

        async with client.get_stream(CURSOR) as resumed:
            placed(f"GET Last-Event-ID: {CURSOR}", resumed.response, REPLICA_B)
            event = await resumed.until(lambda event: event.message is not None)
            if event.message is None or event.message.get("id") == first_id:
                raise LabError(f"replica b answered the resume with {event}")
            ctx.note("resume_event_ids", [e.id for e in resumed.events])

        retry_id = client.next_id()
        async with client.post(progress_call(retry_id, "create_ticket", TICKET)) as retry:
            placed(f"tools/call {retry_id}", retry.response, REPLICA_A)
            answer = await retry.response_message(retry_id)
            ctx.note("retry_event_ids", [e.id for e in retry.events])
        ctx.note("retry_result", answer["result"]["content"][0]["text"])
        response = await http.delete(url, headers=client.headers())
        placed("DELETE", response, REPLICA_B)
    ctx.note("tickets_filed", (await replica_a.state())["tickets"])


def run(ctx: LabContext) -> None:
    store = ctx.out_dir / "sessions.sqlite3"
    replicas = [
        start_replica(ctx, replica=REPLICA_A, store=store, session_prefix="rr", pause_after=8),
        start_replica(ctx, replica=REPLICA_B, store=store, session_prefix="rr"),
    ]
    balancer = start_balancer(ctx, [replica.root for replica in replicas])
    url = ctx.start_proxy(balancer, replica_header="X-Served-By") + MCP_PATH
    ctx.run_async(_drive, ctx, replicas[0], url)


SCENARIO = Scenario(
    name="round-robin-replicas",
    description="a resume lands on another replica, which reuses ids; the client re-issues",
    run=run,
    expected_path=Path(__file__).with_name("round_robin_replicas.expected.json"),
)
