"""clean-typescript: the TypeScript SDK server, a dropped tool stream and a correct resume.

`lab/ts/server.mjs`: the official TypeScript SDK's StreamableHTTPServerTransport with its
example InMemoryEventStore (ids `<streamId>_<epoch-ms>_<random>`), driven by a raw httpx client
speaking 2025-11-25. On the wire:

1. `initialize` (id 1; SSE: priming event, result), `notifications/initialized` (202),
   `tools/list` (id 2; SSE: priming event, result).
2. `tools/call slow_report {"steps": 5}` (id 3, with a progress token): priming event, progress
   1, 2. The client closes the connection there (a drop: not a cancellation); the server, told
   to wait for exactly that, runs the tool on and stores progress 3..5 and the result.
3. The client resumes with `GET` + `Last-Event-ID` = progress 2's id. The SDK replays progress
   3, 4, 5 and the result under their original ids (no new priming event) and keeps the
   response open; the client closes it once the result arrived.
4. `tools/call lookup` (id 4, read-only; SSE: priming event, result), then `DELETE`.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from lab.clients.raw import SessionedClient, SseEvent
from lab.faults.launch import progress_call
from lab.framework import LabContext, LabError, Scenario
from lab.ts import MCP_PATH, TsServer, start_ts_server

STEPS = 5
DROP_AFTER = 2


def _progress(events: list[SseEvent]) -> list[float]:
    return [
        e.message["params"]["progress"]
        for e in events
        if e.message is not None and e.message.get("method") == "notifications/progress"
    ]


async def _drive(ctx: LabContext, server: TsServer, url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        client = SessionedClient(http, url, client_name="seamwatch-lab-clean-typescript")
        await client.initialize()
        ctx.note("session", client.session_id)
        listed, _ = await client.request("tools/list")
        ctx.note("tools", sorted(tool["name"] for tool in listed["tools"]))

        call_id = client.next_id()
        body = progress_call(call_id, "slow_report", {"steps": STEPS})
        async with client.post(body) as call:
            await call.until(lambda e: _progress([e]) == [DROP_AFTER])
            cursor = call.last_event_id
            ctx.note("call_event_ids", [e.id for e in call.events])
        if cursor is None:
            raise LabError("the tool stream carried no event id to resume from")
        ctx.note("resume_cursor", cursor)
        await server.settle()  # the tool ran to its end while the client was away

        async with client.get_stream(cursor) as resumed:
            answer = await resumed.response_message(call_id)
            ctx.note("replayed_event_ids", [e.id for e in resumed.events])
        replayed = _progress(resumed.events)
        ctx.note("replayed_progress", replayed)
        if replayed != list(range(DROP_AFTER + 1, STEPS + 1)) or "result" not in answer:
            raise LabError(f"the resume did not replay the rest in order: {resumed.events}")

        await client.call_tool("lookup", {"key": "region"})
        status = await client.delete()
        if status != 200:
            raise LabError(f"DELETE answered {status}")


def run(ctx: LabContext) -> None:
    server = start_ts_server(ctx, pause_after=DROP_AFTER)
    url = ctx.start_proxy(server.root) + MCP_PATH
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="clean-typescript",
    description="TypeScript SDK server: a dropped tool stream and a correct resume (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_typescript.expected.json"),
)
