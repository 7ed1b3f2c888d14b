"""clean-era-fallback: the official client probes 2026-07-28, is refused, falls back to a session.

The TypeScript SDK server (`lab/ts/server.mjs`, SDK 1.x: sessioned Streamable HTTP only) and
the official Python client in its default `auto` mode. On the wire:

1. `server/discover` with `MCP-Protocol-Version: 2026-07-28` and no session: the sessioned
   server refuses it with 400 and a JSON-RPC error whose id is null ("Mcp-Session-Id header is
   required"). The client takes any such refusal as "not a 2026 server" (`mcp.client._probe`).
2. The fallback handshake: `initialize` (2025-11-25; SSE: priming event, result) assigns an
   `Mcp-Session-Id`; `notifications/initialized` (202); the standalone GET stream.
3. `tools/list`, `tools/call slow_report {"steps": 3}` with progress 1..3 on its SSE stream,
   `tools/call lookup` (read-only).
4. The client ends the session with DELETE.

The capture mixes eras: one refused 2026 exchange and a sessioned session. Analyzed per
exchange, nothing in it is a fault: no finding at all.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.ts import MCP_PATH, start_ts_server

STEPS = 3


async def _drive(ctx: LabContext, url: str) -> None:
    seen_progress: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append(progress)

    client = Client(url, client_info=Implementation(name="seamwatch-lab-fallback", version="1"))
    async with client:
        ctx.note("mode", client.mode)
        ctx.note("protocol_version", client.protocol_version)
        tools = await client.list_tools()
        ctx.note("tools", sorted(tool.name for tool in tools.tools))
        report = await client.call_tool(
            "slow_report", {"steps": STEPS}, progress_callback=on_progress
        )
        lookup = await client.call_tool("lookup", {"key": "region"})
    ctx.note("progress_seen", seen_progress)
    if report.is_error or lookup.is_error:
        raise LabError(f"a tool call failed: {report.content}, {lookup.content}")
    if seen_progress != [1, 2, 3]:
        raise LabError(f"expected progress 1..3, got {seen_progress}")


def run(ctx: LabContext) -> None:
    server = start_ts_server(ctx)
    url = ctx.start_proxy(server.root) + MCP_PATH
    ctx.run_async(_drive, ctx, url)


SCENARIO = Scenario(
    name="clean-era-fallback",
    description="SDK client: 2026 probe refused by a sessioned-only server, falls back (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_era_fallback.expected.json"),
)
