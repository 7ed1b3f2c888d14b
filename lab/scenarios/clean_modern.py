"""clean-modern: 2026-07-28 traffic from the official SDK client (default mode), all correct.

On the wire (no sessions, no GET stream, no event ids; every POST self-contained with the
`_meta` envelope and `Mcp-Method` / `Mcp-Name` headers):

1. `server/discover` (the default `auto` mode probes it and adopts 2026-07-28), `tools/list`.
2. `create_ticket` (side-effecting) returns an `InputRequiredResult` asking for confirmation by
   elicitation; the client answers it and re-sends the same `tools/call` under a new id with
   `inputResponses` and `requestState` (an MRTR leg, not a repeat).
3. `get_balance` (read-only) twice with identical arguments: a read-only retry.
4. `slow_report` streams `notifications/progress` on an SSE response, then its result.
5. `charge_card` once.

Expected: nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData, Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    questions: list[str] = []

    async def answer(context: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        questions.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    seen_progress: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append(progress)

    client = Client(
        url,
        elicitation_callback=answer,
        client_info=Implementation(name="seamwatch-lab-clean-modern", version="1"),
    )
    async with client:
        version = client.protocol_version
        ctx.note("protocol_version", version)
        await client.list_tools()
        ticket = await client.call_tool("create_ticket", {"title": "printer on fire"})
        balances = [await client.call_tool("get_balance", {"account": "acme"}) for _ in range(2)]
        await client.call_tool("slow_report", {"steps": 2}, progress_callback=on_progress)
        await client.call_tool("charge_card", {"card": "4242", "amount_cents": 1250})
    ctx.note("elicitations", questions)
    ctx.note("progress_seen", seen_progress)
    state = await server.state()
    ctx.note("tickets", state["tickets"])
    ctx.note("charges", len(state["charges"]))
    if version != "2026-07-28" or len(questions) != 1 or seen_progress != [1, 2]:
        raise LabError(f"not the intended 2026 exchange: {version}, {questions}, {seen_progress}")
    if (
        ticket.is_error
        or any(b.is_error for b in balances)
        or state["tickets"] != ["printer on fire"]
    ):
        raise LabError(f"a tool call failed: {ticket.content}, {state['tickets']}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="none")
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="clean-modern",
    description="2026-07-28 SDK client: MRTR elicitation, read-only repeats, progress (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_modern.expected.json"),
)
