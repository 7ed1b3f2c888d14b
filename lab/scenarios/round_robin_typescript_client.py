"""round-robin-typescript-client: the TypeScript SDK's client resumes on the wrong replica.

`round-robin-replicas` with the official TypeScript SDK client (`lab/ts/client.mjs`) and what
an application on it does: two `lab.faults.server` replicas behind the round-robin
`lab.balancer`, sessions in a shared SQLite file, event buffers and their `e<n>` counters in
each process; `retry: 300` in every priming event, and replica a ends the first streamed call's
response after progress 1 (`--close-after 1`). On the wire (2025-11-25; the balancer sends
HTTP request k to replica k mod 2, the transport's standalone GET among them):

1. `initialize` (id 0) -> a, `notifications/initialized` -> b, the transport's standalone GET
   stream -> a (the client waits 300 ms after connecting, `--settle-ms`, so that the GET, sent
   without waiting, is counted before the next request), `tools/list` (id 1) -> b.
2. `tools/call create_ticket {"title": ..., "steps": 4}` (id 2, with a progress token) -> a:
   the ticket is filed, a priming event and progress 1 come, then a ends the response; the
   rest goes into a's buffer.
3. The transport, having seen the priming event and no response, waits the `retry` and resumes
   with `GET` + `Last-Event-ID` = progress 1's id -> b. Replica b has no buffer for the
   session: it answers 200 with a fresh stream under the old cursor, a priming event and a
   `notifications/message`, with ids a already issued with other payloads.
4. No result comes: after 2 s the call times out, the SDK cancels it
   (`notifications/cancelled`), and the application re-issues the same `create_ticket` with
   the same arguments (id 3), answered in full. Two tickets are filed.
5. `tools/call lookup` (id 4, read-only), then `DELETE`.

Expected: duplicate-event-id (b's fresh events reuse a's ids with other payloads),
cross-replica-resume (the cursor from a, answered by b), phantom-resume (b answered 200 with
fresh messages while the response to request 2 was still owed, and said nothing of it),
repeated-tool-call (2 then 3, high: the first was lost). Allowed as also true: counter-reset
(the stream's ids run back at the resume).
"""

from __future__ import annotations

from pathlib import Path

from lab.faults.launch import MCP_PATH, start_balancer, start_replica
from lab.framework import LabContext, LabError, Scenario
from lab.ts import run_ts_client

RETRY_MS = 300
TICKET = '{"title": "disk full on db-2", "steps": 4}'


def run(ctx: LabContext) -> None:
    store = ctx.out_dir / "sessions.sqlite3"
    replica_a = start_replica(
        ctx, replica="replica-a", store=store, session_prefix="rr", close_after=1, retry_ms=RETRY_MS
    )
    replica_b = start_replica(
        ctx, replica="replica-b", store=store, session_prefix="rr", retry_ms=RETRY_MS
    )
    balancer = start_balancer(ctx, [replica_a.root, replica_b.root])
    url = ctx.start_proxy(balancer, replica_header="X-Served-By") + MCP_PATH
    notes = run_ts_client(
        ctx,
        url,
        replica_a.root,
        *("--tool", "create_ticket", "--tool-args", TICKET),
        *("--timeout-ms", "2000", "--retry-call"),
        *("--settle-ms", "300"),  # the standalone GET first: see the docstring
        *("--read-tool", "lookup", "--read-args", '{"key": "region"}'),
    )
    tickets = ctx.run_async(replica_a.state)["tickets"]
    ctx.note("tickets_filed", tickets)
    if len(notes["attempts"]) != 2 or notes["attempts"][-1] != "result":
        raise LabError(f"expected a failed call, then its re-issue answered: {notes['attempts']}")
    if tickets != 2:
        raise LabError(f"expected the ticket filed twice, got {tickets} ticket(s)")


SCENARIO = Scenario(
    name="round-robin-typescript-client",
    description="the TypeScript SDK client resumes on a replica without the buffer, then retries",
    run=run,
    expected_path=Path(__file__).with_name("round_robin_typescript_client.expected.json"),
)
