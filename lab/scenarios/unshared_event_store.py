"""unshared-event-store: replicas share sessions but not events; a resume on the other replica
replays nothing.

Reproduces python-sdk #2570 (the only EventStore is in-memory, so behind a load balancer a client
reconnecting to another replica finds no events to replay: resumability silently fails): two
`lab.faults.bugs --bug no-shared-store` replicas, `replica-a` (`--pause-after 2`) and
`replica-b`, behind the round-robin `lab.balancer`, sessions in a shared SQLite file, events in
each process. What differs from the report: the servers are the lab's, not the SDK's, and the
cursor is resumed once. The proxy runs with `--replica-header X-Served-By`; the balancer sends
request k to replica k mod 2, so (each answer's `X-Served-By` is checked):

1. `initialize` (id 1) -> a; `notifications/initialized` (202) -> b; `tools/list` (id 2) -> a;
   `ping` (id 3) -> b.
2. `tools/call slow_report {"steps": 4}` (id 4, with a progress token) -> a: e1 (priming), e2,
   e3 (progress 1, 2); then the client's connection drops. Replica a finishes the call into its
   own buffer: e4, e5 (progress 3, 4), e6 (the result).
3. `GET` + `Last-Event-ID: e3` -> b. Replica b knows the session (the store is shared) but holds
   no event of it: it answers 200 with an empty stream. The result never comes.
4. `DELETE` -> a ends the session.

Expected: cross-replica-resume (cursor e3 issued by a, resume answered by b). Also true, so
allowed: lost-response (request 4 never answered on the wire) and causal-gap (its stream owed
the result after e3).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient
from lab.faults.launch import MCP_PATH, progress_call, served_by, start_balancer
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._sdk_bug import BugReplica, start_bug_replica

REPLICA_A, REPLICA_B = "replica-a", "replica-b"
REPORT = {"steps": 4}
CURSOR = "e3"


async def _drive(ctx: LabContext, replica_a: BugReplica, url: str) -> None:
    placements: list[tuple[str, str]] = []

    def placed(what: str, response: httpx.Response, expected: str) -> None:
        placements.append((what, served_by(response)))
        ctx.note("placements", placements)
        if served_by(response) != expected:
            raise LabError(f"{what} was served by {served_by(response)}, not {expected}")

    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-unshared-store")
        init = await client.initialize()
        placed("initialize", init.response, REPLICA_A)
        ctx.note("session", client.session_id)
        _, listed = await client.request("tools/list")
        placed("tools/list", listed.response, REPLICA_A)
        _, pinged = await client.request("ping")
        placed("ping", pinged.response, REPLICA_B)
        call_id = client.next_id()
        async with client.post(progress_call(call_id, "slow_report", REPORT)) as call:
            placed(f"tools/call {call_id}", call.response, REPLICA_A)
            await call.until(lambda event: event.id == CURSOR)
            ctx.note("call_event_ids", [e.id for e in call.events])
        state = await replica_a.settle()
        ctx.note("replica_a_buffer", state["buffers"].get(client.session_id))
        async with client.get_stream(CURSOR) as resumed:
            placed(f"GET Last-Event-ID: {CURSOR}", resumed.response, REPLICA_B)
            while await resumed.next_event() is not None:
                pass
        ctx.note("resume_event_ids", [e.id for e in resumed.events])
        if resumed.events:
            raise LabError(f"replica b replayed {resumed.events}")
        response = await http.delete(url, headers=client.headers())
        placed("DELETE", response, REPLICA_A)


def run(ctx: LabContext) -> None:
    store = ctx.out_dir / "sessions.sqlite3"
    replicas = [
        start_bug_replica(
            ctx,
            bug="no-shared-store",
            replica=name,
            store=store,
            session_prefix="unshared",
            pause_after=2,
        )
        for name in (REPLICA_A, REPLICA_B)
    ]
    balancer = start_balancer(ctx, [replica.root for replica in replicas])
    url = ctx.start_proxy(balancer, replica_header="X-Served-By") + MCP_PATH
    ctx.run_async(_drive, ctx, replicas[0], url)


SCENARIO = Scenario(
    name="unshared-event-store",
    description="replicas without a shared event store: a resume on the other one replays nothing",
    run=run,
    expected_path=Path(__file__).with_name("unshared_event_store.expected.json"),
)
