"""shared-event-store: two sessions' resumes replay each other's events from one event store.

The mcp 2.3 SDK server keys a standalone GET stream's stored events `_GET_stream` and a POST
stream's by the request's JSON-RPC id, and its `EventStore` interface carries no session; one
store serves every session of the process (the lab's, as an in-memory store or a Redis store
behind replicas would). So every session's GET stream shares one key, and, each client numbering
its requests from 1, two sessions' streams of request 3 share another. On the wire (2025-11-25,
two official clients in `mode="legacy"`, lab event store with seeded UUID ids, `retry: 800` in
every priming event):

1. Each client: `initialize` (id 1), its standalone GET stream, `tools/list` (id 2).
2. Both at once: `tools/call slow_report {"steps": 3, "close_after": 1}` (id 3 in each
   session). The server closes both streams after their progress 1; both tools run on, and their
   progress and results are stored, interleaved, under key "3". Each client resumes from the last
   id it saw and receives both sessions' progress and both results for request 3.
3. A: `announce` (id 4; its note on A's GET stream gives A a cursor there: the SDK sends that
   stream no priming event), `drop_standalone_stream` (id 5): the server closes A's GET stream.
   B: `announce` (id 4): its note goes out live on B's GET stream. A's client waits the `retry`
   and resumes its GET stream from its note's id: the store replays every `_GET_stream` event
   after it, B's note among them, so A's client receives B's note.
4. DELETE ends each session.

Expected: cross-session-replay (the tool streams' resumes answer request 3 twice with events the
other session received too; A's GET resume carries B's note); evidence request 3. The two
results are equal ("report done in 3 steps"), so duplicate-response has nothing to say.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client
from mcp_types import Implementation, LoggingMessageNotificationParams

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

STEPS = 3
RETRY_MS = 800
NOTE_FOR_A = "meant for session A"
NOTE_FOR_B = "meant for session B only"


class _Session:
    """One client and what it saw: log notes and the progress of its tool call."""

    def __init__(self, name: str, url: str) -> None:
        self.notes: list[object] = []
        self.progress: list[float] = []

        async def on_log(params: LoggingMessageNotificationParams) -> None:
            self.notes.append(params.data)

        self.client = Client(
            url,
            mode="legacy",
            logging_callback=on_log,
            client_info=Implementation(
                name=f"seamwatch-lab-shared-event-store-{name}", version="1"
            ),
        )

    async def report(self, server: SdkServer) -> None:
        result = await self.client.call_tool(
            "slow_report",
            {"steps": STEPS, "close_after": 1},
            progress_callback=server.report_progress_into(self.progress),
        )
        if result.is_error:
            raise LabError(f"slow_report failed: {result.content}")


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    a, b = _Session("a", url), _Session("b", url)
    async with a.client, b.client:
        await a.client.list_tools()
        await b.client.list_tools()
        async with anyio.create_task_group() as calls:
            calls.start_soon(a.report, server)
            calls.start_soon(b.report, server)
        await a.client.call_tool("announce", {"text": NOTE_FOR_A})  # A's cursor on its GET
        await a.client.call_tool("drop_standalone_stream", {})
        await b.client.call_tool("announce", {"text": NOTE_FOR_B})
        with anyio.move_on_after(RETRY_MS / 1000 * 5):
            while NOTE_FOR_B not in a.notes:  # A's GET resume replays B's note
                await anyio.sleep(0.05)
        if NOTE_FOR_B not in a.notes:
            raise LabError(f"A's GET stream resume did not replay B's note: A saw {a.notes}")
    ctx.note("notes_seen", {"a": a.notes, "b": b.notes})
    ctx.note("progress_seen", {"a": a.progress, "b": b.progress})
    replays = (await server.state())["event_store"]["replays"]
    ctx.note("replays", replays)
    if all(len(p) <= STEPS for p in (a.progress, b.progress)):
        raise LabError(f"no tool stream's resume replayed the other session's events: {replays}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="uuid", seed=11, retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    ctx.note("note_for_b", NOTE_FOR_B)
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="shared-event-store",
    description="two sessions' resumes replay each other's events from one event store",
    run=run,
    expected_path=Path(__file__).with_name("shared_event_store.expected.json"),
)
