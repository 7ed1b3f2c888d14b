"""clean-resume: the SDK server closes a tool's SSE stream with `retry`; the SDK client resumes.

On the wire (2025-11-25, official client in `mode="legacy"`, lab event store with seeded UUID
ids, `retry: 300` in every priming event):

1. `initialize` (SSE: priming event, result), `notifications/initialized` (202), the client's
   standalone GET stream, `tools/list`.
2. `announce` sends one `notifications/message` on the standalone GET stream.
3. `slow_report` streams progress 1 on its POST stream; once the client has seen it the
   scenario opens gate "slow-report" and the server closes that stream (server-initiated close,
   not the end of the logical stream). Progress 2, 3 and the result are stored meanwhile.
4. The client waits the `retry` and resumes with a GET carrying `Last-Event-ID` = progress 1's
   id: the server replays progress 2, 3 and the result, then a new priming event; the client
   closes that response once the result arrived.
5. `get_balance` (read-only), then DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

RETRY_MS = 300
STEPS = 3


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    seen_progress: list[float] = []

    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-clean-resume", version="1"),
    )
    async with client:
        tools = await client.list_tools()
        ctx.note("tools", sorted(tool.name for tool in tools.tools))
        await client.call_tool("announce", {"text": "maintenance window at 02:00"})
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
    ctx.note("replays", store["replays"])
    if seen_progress != [1, 2, 3] or len(store["replays"]) != 1:
        raise LabError(f"the resume did not deliver the rest: {seen_progress}, {store['replays']}")
    replay = store["replays"][0]
    ctx.note("resume_cursor", replay["cursor"])
    ctx.note("replayed_event_ids", replay["replayed"])


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="uuid", seed=4, retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="clean-resume",
    description="SDK server closes a tool stream with retry; the SDK client resumes (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_resume.expected.json"),
)
