"""clean-python-client-typescript-server: the Python SDK's client resumes a TypeScript SDK stream.

The official Python SDK client (`mode="legacy"`) against the official TypeScript SDK server
(`lab/ts/server.mjs`, the SDK's example event store, `retry: 300` in every priming event) with
`--close-after 1`: the first streamed tool call closes its own POST stream after progress 1
(the SDK's `closeSSEStream`, SEP-1699) and runs on. On the wire (2025-11-25):

1. `initialize` (SSE), `notifications/initialized` (202), the client's standalone GET stream,
   `tools/list`.
2. `tools/call slow_report {"steps": 3}` with a progress token: priming event, progress 1; the
   server closes that stream. Progress 2, 3 and the result go into the event store.
3. The client waits the `retry` and resumes with a GET carrying `Last-Event-ID` = progress 1's
   id: the server replays progress 2, 3 and the result.
4. `lookup` (read-only), then DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.ts import MCP_PATH, TsServer, start_ts_server

RETRY_MS = 300


async def _drive(ctx: LabContext, server: TsServer, url: str) -> None:
    seen_progress: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen_progress.append(value)

    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-python-client", version="1"),
    )
    async with client:
        await client.list_tools()
        result = await client.call_tool("slow_report", {"steps": 3}, progress_callback=progress)
        if result.is_error:
            raise LabError(f"slow_report failed: {result.content}")
        await client.call_tool("lookup", {"key": "region"})
    ctx.note("progress_seen", seen_progress)
    if seen_progress != [1, 2, 3]:
        raise LabError(f"the resume did not deliver the rest: {seen_progress}")
    await server.settle()


def run(ctx: LabContext) -> None:
    server = start_ts_server(ctx, close_after=1, retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    ctx.run_async(_drive, ctx, server, ctx.start_proxy(server.root) + MCP_PATH)


SCENARIO = Scenario(
    name="clean-python-client-typescript-server",
    description="the Python SDK client resumes a stream the TypeScript SDK server closed (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_python_client_typescript_server.expected.json"),
)
