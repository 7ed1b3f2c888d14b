"""clean-typescript-client: the TypeScript SDK's client resumes a stream the SDK server closed.

`lab/ts/client.mjs`: the official TypeScript SDK's Client and StreamableHTTPClientTransport,
against the official (Python) SDK server with the lab event store (seeded UUID ids) and
`retry: 300` in every priming event. The client and the server are two implementations. On the
wire (2025-11-25):

1. `initialize` (SSE: priming event, result), `notifications/initialized` (202), the
   transport's standalone GET stream, `tools/list`.
2. `tools/call slow_report {"steps": 3, "close_after": 1}` with a progress token: priming event,
   progress 1; the client's progress callback opens gate "slow-report" and the server closes
   that stream (server-initiated close, not the end of the logical stream). Progress 2, 3 and
   the result are stored meanwhile.
3. The transport, having seen the priming event and no response, waits the server's `retry`
   and resumes with a GET carrying `Last-Event-ID` = progress 1's id: the server replays
   progress 2, 3 and the result.
4. `get_balance` (read-only), then DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

from lab.framework import LabContext, LabError, Scenario
from lab.servers.sdk import start_sdk_behind_proxy
from lab.ts import run_ts_client

RETRY_MS = 300


def run(ctx: LabContext) -> None:
    server, url = start_sdk_behind_proxy(ctx, event_ids="uuid", seed=5, retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    notes = run_ts_client(
        ctx,
        url,
        server.root,
        *("--tool-args", '{"steps": 3, "close_after": 1}', "--gate", "slow-report"),
    )
    store = ctx.run_async(server.state)["event_store"]
    ctx.note("replays", store["replays"])
    if notes["progress_seen"] != [1, 2, 3] or notes["report_is_error"]:
        raise LabError(f"the resume did not deliver the rest: {notes}")
    if len(store["replays"]) != 1:
        raise LabError(f"expected one replay by the server, got {store['replays']}")


SCENARIO = Scenario(
    name="clean-typescript-client",
    description="the TypeScript SDK client resumes a stream the SDK server closed (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_typescript_client.expected.json"),
)
