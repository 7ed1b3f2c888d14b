"""clean-typescript-pair: the TypeScript SDK's client and server, a server-closed stream resumed.

Both sides the official TypeScript SDK: `lab/ts/server.mjs` (the SDK's example event store,
`retry: 300` in every priming event) with `--close-after 1` (the first streamed tool call
closes its own POST stream after progress 1 with the SDK's `closeSSEStream`, SEP-1699, and
runs on), and `lab/ts/client.mjs`. On the wire (2025-11-25):

1. `initialize` (SSE), `notifications/initialized` (202), the transport's standalone GET
   stream, `tools/list`.
2. `tools/call slow_report {"steps": 3}` with a progress token: priming event, progress 1; the
   server closes that stream. Progress 2, 3 and the result go into the event store.
3. The transport, having seen the priming event and no response, waits the `retry` and resumes
   with a GET carrying `Last-Event-ID` = progress 1's id: the server replays progress 2, 3 and
   the result.
4. `lookup` (read-only), then DELETE ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path

from lab.framework import LabContext, LabError, Scenario
from lab.ts import MCP_PATH, run_ts_client, start_ts_server

RETRY_MS = 300


def run(ctx: LabContext) -> None:
    server = start_ts_server(ctx, close_after=1, retry_ms=RETRY_MS)
    ctx.note("retry_ms", RETRY_MS)
    url = ctx.start_proxy(server.root) + MCP_PATH
    notes = run_ts_client(
        ctx,
        url,
        server.root,
        *("--tool-args", '{"steps": 3}'),
        *("--read-tool", "lookup", "--read-args", '{"key": "region"}'),
    )
    if notes["progress_seen"] != [1, 2, 3] or notes["report_is_error"]:
        raise LabError(f"the resume did not deliver the rest: {notes}")
    ctx.run_async(server.settle)


SCENARIO = Scenario(
    name="clean-typescript-pair",
    description="the TypeScript SDK client resumes a stream its SDK server closed (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_typescript_pair.expected.json"),
)
