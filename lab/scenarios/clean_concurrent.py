"""clean-concurrent: one SDK session with tool streams open side by side, and server-closed
streams resumed while others run.

The other clean scenarios make one call at a time. Here streams interleave, which is where a
detector that pairs events by order rather than by stream would see resets, gaps or replays that
are not there. One session only: the SDK keys a POST stream's stored events by its request id,
which is unique within a session, so the lab's one event store replays each stream alone (two
sessions at once share those keys: `shared-event-store`). On the wire (2025-11-25, official
client in `mode="legacy"`, lab event store with one counter for event ids, so each stream's ids
skip the numbers the others took; `retry: 200` in every priming event):

1. `initialize`, the standalone GET stream, `tools/list`.
2. At once: `slow_report {"steps": 3, "hold_after": 1}` x CALLS (progress 1..3 on each POST
   stream; each waits after its progress 1 until the client has seen every call's, so the
   streams are open side by side however the machine schedules them), `get_balance` x CALLS
   (read-only) and `announce` (a `notifications/message` on the GET stream).
3. At once: `slow_report {"steps": 3, "close_after": 1}` x RESUMED. The server closes each of
   those streams after its progress 1; the client waits the `retry` and resumes each with a GET
   carrying the last id it saw, and the server replays the rest of that stream.
4. DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client
from mcp_types import Implementation

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

CALLS = 4
RESUMED = 3
STEPS = 3
RETRY_MS = 200


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    seen: dict[str, list[float]] = {}
    client = Client(
        url,
        mode="legacy",
        client_info=Implementation(name="seamwatch-lab-clean-concurrent", version="1"),
    )

    held: list[str] = []  # the side-by-side calls that sent their progress 1

    async def report(label: str, arguments: dict[str, int]) -> None:
        progress = seen.setdefault(label, [])
        on_progress = server.report_progress_into(progress)

        async def side_by_side(step: float, total: float | None, message: str | None) -> None:
            await on_progress(step, total, message)
            if arguments.get("hold_after") == step:
                held.append(label)
                if len(held) == CALLS:
                    await server.open_gate("side-by-side")

        result = await client.call_tool("slow_report", arguments, progress_callback=side_by_side)
        if result.is_error:
            raise LabError(f"{label} failed: {result.content}")

    async with client:
        await client.list_tools()
        async with anyio.create_task_group() as calls:
            for i in range(CALLS):
                calls.start_soon(report, f"report-{i}", {"steps": STEPS, "hold_after": 1})
                calls.start_soon(client.call_tool, "get_balance", {"account": f"acct-{i}"})
            calls.start_soon(client.call_tool, "announce", {"text": "busy"})
        async with anyio.create_task_group() as calls:
            for i in range(RESUMED):
                calls.start_soon(report, f"resumed-{i}", {"steps": STEPS, "close_after": 1})
    ctx.note("progress_seen", dict(sorted(seen.items())))
    replays = (await server.state())["event_store"]["replays"]
    ctx.note("replays", replays)
    # Each call saw its progress once each, in order: no stream got another's events.
    wrong = {label: p for label, p in seen.items() if p != list(range(1, STEPS + 1))}
    if wrong or len(replays) != RESUMED:
        raise LabError(f"a call saw other progress, or a resume is missing: {wrong}, {replays}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="counter", retry_ms=RETRY_MS)
    for name, value in (
        ("calls", CALLS),
        ("resumed", RESUMED),
        ("steps", STEPS),
        ("retry_ms", RETRY_MS),
    ):
        ctx.note(name, value)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="clean-concurrent",
    description="one SDK session with tool streams side by side and resumes among them (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_concurrent.expected.json"),
)
