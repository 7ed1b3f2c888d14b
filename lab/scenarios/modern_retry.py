"""modern-retry: a 2026-07-28 tool call's stream breaks after the tool ran; the client re-issues it.

On the wire (2026-07-28, raw httpx client shaped like the SDK client, SDK server):

1. `server/discover` (id 1), `tools/list` (id 2): `charge_card` is listed without annotations,
   so it is side-effecting.
2. `tools/call charge_card {"card": "4242", "amount_cents": 1999}` with id 3 and a progress
   token: the server charges the card (charge 1) and streams "charge 1 submitted" as
   `notifications/progress` on an SSE response, then waits for its payment gateway (the lab
   gate "charge-settle"). The client gives up and closes the response: on 2026-07-28 that is
   the request's cancellation, and its response never comes.
3. The scenario waits until the server has seen the cancellation (`/lab/state`, off the wire),
   then opens the gate.
4. The client re-issues the same call under a new id, 4: the server charges again (charge 2)
   and this time answers. The card was charged twice.

Expected: repeated-tool-call, evidence request ids "3" and "4" (canonical JSON of the ids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from lab.clients.raw import ClientError, ModernClient, wait_until
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

FIRST_ID, RETRY_ID = 3, 4
ARGUMENTS = {"card": "4242", "amount_cents": 1999}


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    async with httpx.AsyncClient(timeout=ctx.remaining()) as http:
        client = ModernClient(http, url, client_name="seamwatch-lab-retry-client")
        await client.request(1, "server/discover")
        tools = await client.request(2, "tools/list")
        charge_tool = next(t for t in tools["tools"] if t["name"] == "charge_card")
        ctx.note("charge_card_annotations", charge_tool.get("annotations"))

        call = {"name": "charge_card", "arguments": ARGUMENTS}
        first = client.body(FIRST_ID, "tools/call", call, progress_token=FIRST_ID)
        async with client.post(first) as stream:
            if stream.status != 200 or not stream.is_sse:
                raise LabError(f"the first call did not stream: {stream.status}")
            event = await stream.next_event()
            message = event.message if event is not None else None
            if message is None or message.get("method") != "notifications/progress":
                raise LabError(f"expected the progress of charge 1, got {event}")
            # Leaving the block closes the response: the stream breaks here.

        async def first_cancelled() -> bool:
            charges: list[dict[str, Any]] = (await server.state())["charges"]
            return bool(charges) and charges[0]["outcome"] == "cancelled"

        await wait_until(first_cancelled, timeout=ctx.remaining())
        await server.open_gate("charge-settle")

        retry = client.body(RETRY_ID, "tools/call", call, progress_token=RETRY_ID)
        async with client.post(retry) as stream:
            try:
                answer = await stream.response_message(RETRY_ID)
            except ClientError as exc:
                raise LabError(f"the re-issued call got no answer: {exc}") from exc
    charges = (await server.state())["charges"]
    ctx.note("charges", charges)
    ctx.note("request_ids", [FIRST_ID, RETRY_ID])
    ctx.note("retry_result", answer.get("result"))
    if [c["outcome"] for c in charges] != ["cancelled", "settled"]:
        raise LabError(f"expected one cancelled and one settled charge: {charges}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="none", charge_gate=True)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="modern-retry",
    description="2026-07-28: the stream of a side-effecting call breaks; it is re-issued, new id",
    run=run,
    expected_path=Path(__file__).with_name("modern_retry.expected.json"),
)
