"""clean-stateless: a 2025 server without sessions (the SDK's `stateless_http`), all correct.

The official SDK server started with `--stateless` (a fresh transport per request, no
`Mcp-Session-Id`, no event store) and the official client in `mode="legacy"`. On the wire
(2025-11-25, no session header anywhere):

1. `initialize` (SSE: the result), `notifications/initialized` (202).
2. `tools/list`.
3. `tools/call slow_report {"steps": 3}` with a progress token: progress 1..3 and the result on
   the POST's SSE response.
4. `tools/call get_balance` (read-only).

The analyzer keys all of it as one `anon:<client ip>:<initialize flow id>` session (DESIGN.md
§2). Every step is correct behaviour: no finding at all.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import start_sdk_behind_proxy

STEPS = 3


async def _drive(ctx: LabContext, url: str) -> None:
    seen_progress: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append(progress)

    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-clean-stateless", version="1"),
    )
    async with client:
        ctx.note("protocol_version", client.protocol_version)
        tools = await client.list_tools()
        ctx.note("tools", sorted(tool.name for tool in tools.tools))
        report = await client.call_tool(
            "slow_report", {"steps": STEPS}, progress_callback=on_progress
        )
        balance = await client.call_tool("get_balance", {"account": "acme"})
    ctx.note("progress_seen", seen_progress)
    if report.is_error or balance.is_error:
        raise LabError(f"a tool call failed: {report.content}, {balance.content}")
    if seen_progress != [1, 2, 3]:
        raise LabError(f"expected progress 1..3, got {seen_progress}")


def run(ctx: LabContext) -> None:
    _, url = start_sdk_behind_proxy(ctx, stateless=True)
    ctx.run_async(_drive, ctx, url)


SCENARIO = Scenario(
    name="clean-stateless",
    description="a 2025 SDK server without sessions (stateless_http), official client (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_stateless.expected.json"),
)
