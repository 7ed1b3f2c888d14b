"""open-at-shutdown: the capture stops while the client's standalone GET stream is still open.

What a CI job does when it stops the proxy before the client under test has ended its session.
The official SDK server (counter event ids) and the official client in `mode="legacy"`. On the
wire (2025-11-25):

1. `initialize` (priming event, result), `notifications/initialized`, the client's standalone
   GET stream (its own priming event), `tools/list`.
2. `announce`: one `notifications/message` on the GET stream, which the client receives.
3. With the session still open (no DELETE) and the GET stream still listening, the scenario
   stops the lab: SIGTERM to the proxy first, which ends its capture and records the GET
   response as `open_at_shutdown`, then the server. The client's own teardown fails against
   a proxy that is gone and is not part of the capture.

Expected: `capture-health` (info: a response open at capture end, its losses not judged) and
nothing else: every message owed was delivered.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
from mcp import Client
from mcp_types import Implementation, LoggingMessageNotificationParams

from lab.clients.raw import wait_until
from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import SdkServer, start_sdk_behind_proxy

ANNOUNCEMENT = "capture stops in a moment"
_TRANSPORT_LOG = logging.getLogger("mcp.client.streamable_http")


async def _drive(ctx: LabContext, server: SdkServer, url: str) -> None:
    announced = anyio.Event()
    received: list[object] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params.data)
        announced.set()

    client = Client(
        url,
        mode="legacy",
        logging_callback=on_log,
        client_info=Implementation(name="seamwatch-lab-open-at-shutdown", version="1"),
    )
    stopped, level = False, _TRANSPORT_LOG.level
    try:
        async with client:
            await client.list_tools()
            await client.call_tool("announce", {"text": ANNOUNCEMENT})
            with anyio.fail_after(5):
                await announced.wait()
            ctx.note("announcements", received)

            async def listening() -> bool:
                return bool((await server.state())["standalone_listeners"])

            await wait_until(listening, timeout=5)
            # The session and its GET stream are open: stop the proxy (and then the server).
            # The client's DELETE at teardown then fails, as it must: not worth its warning.
            _TRANSPORT_LOG.setLevel(logging.ERROR)
            await anyio.to_thread.run_sync(ctx.stop_all)
            stopped = True
    except Exception as exc:  # the client's teardown against a stopped proxy
        if not stopped:
            raise
        ctx.note("client_teardown", type(exc).__name__)
    finally:
        _TRANSPORT_LOG.setLevel(level)
    if received != [ANNOUNCEMENT]:
        raise LabError(f"the announcement did not arrive on the GET stream: {received}")


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="counter")
    ctx.run_async(_drive, ctx, server, url)


SCENARIO = Scenario(
    name="open-at-shutdown",
    description="the proxy stops while the SDK client's standalone GET stream is open",
    run=run,
    expected_path=Path(__file__).with_name("open_at_shutdown.expected.json"),
)
