"""clean-shared-replicas: resumes land on another replica, which shares the stream's log (clean).

On the wire (2025-11-25, official client in `mode="legacy"`, `retry: 300` in every priming
event): the official SDK server listens as two replicas, `replica-a` and `replica-b`, behind the
lab's round-robin balancer. Both are one server process, so they share the sessions and the
event store, as replicas backed by one shared store (Redis, a database) do. The client's
requests alternate between them.

1. `initialize`, `notifications/initialized`, the standalone GET stream, `tools/list`.
2. `slow_report` twice, one call after the other: after progress 1 the server closes the
   call's POST stream (gate "slow-report", opened once the client has seen progress 1 of the
   first call; it stays open, so the second call's stream may close before its progress 1 is
   written). The client waits the `retry` and resumes with a GET carrying `Last-Event-ID`; the
   balancer sends that GET to the other replica, which replays the rest (progress, then the
   result) from the shared event store.
3. `get_balance` (read-only), then DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity. In particular
`cross-replica-resume` must not flag a resume whose answer delivers the result of a request
that the other replica ran: that replica reads the stream's log.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.faults.launch import start_balancer
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import MCP_PATH, SdkServer, start_sdk_server

RETRY_MS = 300
STEPS = 3
CALLS = 2


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    seen_progress: list[float] = []

    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-clean-shared-replicas", version="1"),
    )
    async with client:
        await client.list_tools()
        for _ in range(CALLS):
            result = await client.call_tool(
                "slow_report",
                {"steps": STEPS, "close_after": 1},
                progress_callback=server.report_progress_into(seen_progress),
            )
            if result.is_error:
                raise LabError(f"slow_report failed: {result.content}")
        await client.call_tool("get_balance", {"account": "acme"})
    ctx.note("progress_seen", seen_progress)
    store = (await server.state())["event_store"]
    replays = store["replays"]
    ctx.note("replays", replays)
    if seen_progress != [1, 2, 3] * CALLS or len(replays) != CALLS:
        raise LabError(f"the resumes did not deliver the rest: {seen_progress}, {replays}")


def run(ctx: LabContext) -> None:
    server = start_sdk_server(ctx, event_ids="uuid", seed=7, retry_ms=RETRY_MS, replicas=2)
    balancer = start_balancer(ctx, server.replicas)
    url = ctx.start_proxy(balancer, replica_header="X-Served-By") + MCP_PATH
    ctx.note("retry_ms", RETRY_MS)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="clean-shared-replicas",
    description="resumes land on another replica sharing the session's event store (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_shared_replicas.expected.json"),
)
