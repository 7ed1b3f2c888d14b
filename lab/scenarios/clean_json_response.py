"""clean-json-response: the SDK server answering every POST with a JSON body, all correct.

The official SDK server started with `--json-response` (the SDK's `json_response`: each POST is
answered with one `application/json` body, never an event stream; sessions and the standalone
GET stream as usual) and the official client in `mode="legacy"`. On the wire (2025-11-25):

1. `initialize` (JSON: the result and `Mcp-Session-Id`), `notifications/initialized` (202), the
   client's standalone GET stream (SSE, event ids from the lab event store).
2. `tools/list`.
3. `announce` sends one `notifications/message` on the standalone GET stream; its result comes
   in the POST's JSON body.
4. `charge_card` twice, for two different cards (side-effecting, no annotations: no repeat),
   and `get_balance` (read-only); each answered in its POST's body.
5. DELETE ends the session.

Every step is correct behaviour: no finding at all. A response in a POST body is no stream:
nothing here may be taken for a lost response, a stream without its answer, or a repeat.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import start_sdk_behind_proxy

CARDS = ("4242-0001", "4242-0002")


async def _drive(ctx: LabContext, url: str) -> None:
    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-clean-json-response", version="1"),
    )
    async with client:
        ctx.note("protocol_version", client.protocol_version)
        tools = await client.list_tools()
        ctx.note("tools", sorted(tool.name for tool in tools.tools))
        results = [await client.call_tool("announce", {"text": "maintenance window at 02:00"})]
        for card in CARDS:
            results.append(
                await client.call_tool("charge_card", {"card": card, "amount_cents": 1250})
            )
        results.append(await client.call_tool("get_balance", {"account": "acme"}))
    failed = [r.content for r in results if r.is_error]
    if failed:
        raise LabError(f"a tool call failed: {failed}")
    ctx.note("results", [r.content[0].text for r in results if r.content])


def run(ctx: LabContext) -> None:
    _, url = start_sdk_behind_proxy(ctx, json_response=True)
    ctx.run_async(_drive, ctx, url)


SCENARIO = Scenario(
    name="clean-json-response",
    description="a 2025 SDK server answering POSTs with JSON bodies, official client (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_json_response.expected.json"),
)
