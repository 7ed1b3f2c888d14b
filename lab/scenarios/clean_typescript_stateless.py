"""clean-typescript-stateless: the TypeScript SDK's client and server without sessions.

`lab/ts/server.mjs --stateless`: the SDK's stateless setup (a transport and server per POST, no
`Mcp-Session-Id`, no event store), as serverless deployments run it; `lab/ts/client.mjs`
against it. On the wire (2025-11-25, no session header anywhere):

1. `initialize` (SSE: the result), `notifications/initialized` (202); the transport's
   standalone GET is refused with 405 (no GET stream on a stateless server), which the client
   takes in its stride.
2. `tools/list` (SSE).
3. `tools/call slow_report {"steps": 3}` with a progress token: progress 1..3 and the result on
   the POST's SSE response, no event ids.
4. `tools/call lookup` (read-only). No DELETE: there is no session to end.

The analyzer keys it all as one `anon:` session (DESIGN.md §2). Every step is correct
behaviour: no finding at all.
"""

from __future__ import annotations

from pathlib import Path

from lab.framework import LabContext, LabError, Scenario
from lab.ts import MCP_PATH, run_ts_client, start_ts_server


def run(ctx: LabContext) -> None:
    server = start_ts_server(ctx, stateless=True)
    notes = run_ts_client(
        ctx,
        ctx.start_proxy(server.root) + MCP_PATH,
        server.root,
        *("--read-tool", "lookup", "--read-args", '{"key": "region"}'),
    )
    if notes["progress_seen"] != [1, 2, 3] or notes["report_is_error"]:
        raise LabError(f"the call did not stream its progress and result: {notes}")


SCENARIO = Scenario(
    name="clean-typescript-stateless",
    description="the TypeScript SDK client and a stateless TypeScript SDK server (clean)",
    run=run,
    expected_path=Path(__file__).with_name("clean_typescript_stateless.expected.json"),
)
