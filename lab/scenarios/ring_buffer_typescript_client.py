"""ring-buffer-typescript-client: the TypeScript SDK's client resumes into an evicted buffer.

`ring-buffer-eviction` with the official TypeScript SDK client (`lab/ts/client.mjs`) instead of
a scripted one, and a server that ends the tool's stream itself: one `lab.faults.server` with a
ring buffer of 4 events per session (`--buffer-size 4`), `retry: 300` in every priming event,
and the first streamed call's response ended by the server after progress 1 (`--close-after
1`). Ids `e<n>` come from the session's counter in the order the server issues them; the
client waits 300 ms after connecting (`--settle-ms`) so that the transport's standalone GET,
sent without waiting, is served before the next request. On the wire (2025-11-25):

1. `initialize` (id 0, JSON), `notifications/initialized` (202), the transport's standalone
   GET stream (e1 priming, e2 a `notifications/message`), `tools/list` (id 1, JSON).
2. `tools/call slow_report {"steps": 8}` (id 2, with a progress token): e3 (priming), e4
   (progress 1), then the server ends the response. The tool runs on into the buffer: e5..e11
   (progress 2..8) and e12 (the result); the buffer keeps e9..e12.
3. The transport, having seen the priming event and no response, waits the `retry` and resumes
   with `GET` + `Last-Event-ID: e4`. The server replays the surviving tail e9..e12 and ends the
   response: progress 2..5 (e5..e8) never reach the client, which takes the replay for a
   continuation and returns the result.
4. `tools/call lookup` (id 3, JSON), then `DELETE`.

Expected: causal-gap (after cursor e4 of request 2's stream the replay starts at e9).
"""

from __future__ import annotations

from pathlib import Path

from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import replica_behind_proxy
from lab.ts import run_ts_client

RETRY_MS = 300
STEPS = 8


def run(ctx: LabContext) -> None:
    server, url = replica_behind_proxy(
        ctx,
        replica="ring-buffer",
        session_prefix="ring",
        buffer_size=4,
        retry_ms=RETRY_MS,
        close_after=1,
    )
    notes = run_ts_client(
        ctx,
        url,
        server.root,
        *("--tool-args", f'{{"steps": {STEPS}}}'),
        *("--settle-ms", "300"),  # the standalone GET first: see the docstring
        *("--read-tool", "lookup", "--read-args", '{"key": "region"}'),
    )
    if notes["report_is_error"] or notes["read_is_error"]:
        raise LabError(f"a tool call failed: {notes}")
    if notes["progress_seen"] != [1, 6, 7, 8]:
        raise LabError(f"expected progress 1, then the surviving 6..8: {notes['progress_seen']}")


SCENARIO = Scenario(
    name="ring-buffer-typescript-client",
    description="the TypeScript SDK client resumes into a ring buffer that evicted events",
    run=run,
    expected_path=Path(__file__).with_name("ring_buffer_typescript_client.expected.json"),
)
