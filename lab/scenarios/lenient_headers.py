"""lenient-headers: a 2026-07-28 server executes a tools/call whose `Mcp-Name` names another tool.

One `lab.faults.modern` server (2026-07-28, sessionless; it never compares the `Mcp-Method` /
`Mcp-Name` headers with the body, where the official SDK answers 400). On the wire (raw httpx
client shaped like the SDK's `ModernClient`: `_meta` envelope, mirrored headers):

1. `server/discover` (id 1), `tools/list` (id 2): `lookup` is read-only, `delete_ticket`
   destructive. All answered `application/json`.
2. `tools/call lookup {"key": "owner"}` (id 3) with `Mcp-Method: tools/call` and
   `Mcp-Name: lookup`: headers and body agree; answered 200.
3. `tools/call delete_ticket {"ticket": "T-7"}` (id 4) sent with `Mcp-Name: lookup` (a gateway
   allowing read-only tools by that header would let it through): the server answers 200 and
   deletes T-7, the tool the body named.

Expected: header-mismatch (request 4's `Mcp-Name` says lookup, its body delete_ticket; the
server accepted it). Request 3 agrees and must not be cited.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from lab.clients.raw import ACCEPT_BOTH, MODERN_VERSION, ModernClient
from lab.faults.launch import MCP_PATH, FaultReplica, start_lenient_modern
from lab.framework import LabContext, LabError, Scenario

AGREEING_ID, MISMATCHED_ID = 3, 4
TICKET = "T-7"


async def _drive(ctx: LabContext, server: FaultReplica, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = ModernClient(http, url, client_name="seamwatch-lab-lenient-headers")
        discovered = await client.request(1, "server/discover")
        ctx.note("supported_versions", discovered.get("supportedVersions"))
        await client.request(2, "tools/list")
        looked_up = await client.request(
            AGREEING_ID, "tools/call", {"name": "lookup", "arguments": {"key": "owner"}}
        )
        ctx.note("lookup_result", looked_up["content"][0]["text"])

        # Built by hand: ModernClient mirrors the body into the headers, as it should.
        call = {"name": "delete_ticket", "arguments": {"ticket": TICKET}}
        body = client.body(MISMATCHED_ID, "tools/call", call)
        headers = {
            "accept": ACCEPT_BOTH,
            "content-type": "application/json",
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": "tools/call",
            "mcp-name": "lookup",  # the body calls delete_ticket
        }
        response = await http.post(url, headers=headers, content=json.dumps(body))
        answer = response.json()
        ctx.note("mismatched_status", response.status_code)
        ctx.note("mismatched_result", answer.get("result"))
    state = await server.state()
    ctx.note("executed", state["calls"])
    ctx.note("deleted", state["deleted"])
    ctx.note("request_ids", [AGREEING_ID, MISMATCHED_ID])
    if response.status_code != 200 or state["deleted"] != [TICKET]:
        raise LabError(f"the mismatched call was not executed: {response.status_code} {answer}")


def run(ctx: LabContext) -> None:
    server = start_lenient_modern(ctx, replica="lenient-headers")
    url = ctx.start_proxy(server.root, replica_header="X-Served-By") + MCP_PATH
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="lenient-headers",
    description="2026-07-28: a server executes a tools/call whose Mcp-Name names another tool",
    run=run,
    expected_path=Path(__file__).with_name("lenient_headers.expected.json"),
)
