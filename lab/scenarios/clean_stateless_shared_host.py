"""clean-stateless-shared-host: two official clients on one host, one stateless server, all correct.

The official SDK server started with `--stateless` (no `Mcp-Session-Id`, a fresh transport per
request) and two official clients in `mode="legacy"` running at the same time from the same
address, as agents on one host, or every client behind one gateway or NAT, look to the proxy.
Both clients count their request ids alike: `initialize` (1), `tools/list` (2), then
`tools/call get_balance` (3) and `tools/call slow_report {"steps": 2}` (4), interleaved on the
wire (each waits for the other between steps).

Without a session id the analyzer keys a 2025 flow by its client address and the latest
`initialize` from it before the flow (DESIGN.md §2): the second client's `initialize` starts the
key under which both clients' later requests fall, so ids 2, 3 and 4 each come twice in one key,
each answered on its own POST. Every step is correct behaviour: no finding at all.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import start_sdk_behind_proxy


async def _client(url: str, name: str, turn: asyncio.Event, next_turn: asyncio.Event) -> list[str]:
    """One client's session: each step waits for its turn and hands the next one over."""
    texts: list[str] = []
    client = Client(url, mode="legacy", client_info=Implementation(name=name, version="1"))

    async def step() -> None:
        await turn.wait()
        turn.clear()

    await step()
    async with client:
        next_turn.set()
        await step()
        await client.list_tools()
        next_turn.set()
        await step()
        balance = await client.call_tool("get_balance", {"account": name})
        next_turn.set()
        await step()
        report = await client.call_tool("slow_report", {"steps": 2})
        next_turn.set()
        for result in (balance, report):
            if result.is_error:
                raise LabError(f"{name}: a tool call failed: {result.content}")
            texts.extend(getattr(block, "text", "") for block in result.content)
    return texts


async def _drive(ctx: LabContext, url: str) -> None:
    first, second = asyncio.Event(), asyncio.Event()
    first.set()
    results = await asyncio.wait_for(
        asyncio.gather(
            _client(url, "seamwatch-lab-host-a", first, second),
            _client(url, "seamwatch-lab-host-b", second, first),
        ),
        timeout=30,
    )
    ctx.note("results", results)


def run(ctx: LabContext) -> None:
    _, url = start_sdk_behind_proxy(ctx, stateless=True)
    ctx.run_async(_drive, ctx, url)


SCENARIO = Scenario(
    name="clean-stateless-shared-host",
    description="two official clients on one host, one stateless SDK server, interleaved (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_stateless_shared_host.expected.json"),
)
