"""cut-stream-typescript-client: a stream ended before its result, nothing to resume from.

The TypeScript SDK's client (`lab/ts/client.mjs`) against one `lab.faults.server` that keeps
no event log (`--no-event-ids`: no priming event, no `id:` on any event, as a server without an
event store) and ends the first streamed call's response after progress 1 (`--close-after 1`),
as a load balancer's idle timeout or a restarting server does. The client waits 300 ms after
connecting (`--settle-ms`) so that its standalone GET is served first. On the wire (2025-11-25):

1. `initialize` (id 0, JSON), `notifications/initialized` (202), the transport's standalone
   GET stream, `tools/list` (id 1, JSON).
2. `tools/call slow_report {"steps": 3}` (id 2, with a progress token): progress 1, then the
   server ends the response. Without an event id the transport cannot resume, and the request
   waits: the result was lost with the stream.
3. The call times out (`--timeout-ms 1500`); the SDK sends `notifications/cancelled` for id 2
   ("Request timed out"), and the application calls the tool again (id 3): progress 1..3 and
   the result.
4. `tools/call lookup` (id 4, JSON), then `DELETE`.

Expected: lost-response for request 2. Its cancellation came after the server had ended the
request's stream without the response and without an event id to resume from: the client gave
up on a response that could no longer come, it did not call off work still under way.
"""

from __future__ import annotations

from pathlib import Path

from lab.framework import LabContext, LabError, Scenario
from lab.scenarios._dropped_call import replica_behind_proxy
from lab.ts import run_ts_client


def run(ctx: LabContext) -> None:
    server, url = replica_behind_proxy(
        ctx, replica="cut-stream", session_prefix="cut", no_event_ids=True, close_after=1
    )
    notes = run_ts_client(
        ctx,
        url,
        server.root,
        *("--timeout-ms", "1500", "--retry-call"),
        *("--settle-ms", "300"),  # the standalone GET first: see the docstring
        *("--read-tool", "lookup", "--read-args", '{"key": "region"}'),
    )
    if notes["attempts"][:1] != ["failed: MCP error -32001: Request timed out"]:
        raise LabError(f"expected the first call to time out: {notes['attempts']}")
    if notes["report_is_error"] or notes["read_is_error"]:
        raise LabError(f"a tool call failed: {notes}")


SCENARIO = Scenario(
    name="cut-stream-typescript-client",
    description="a stream ended before its result with no event id: the client times out",
    run=run,
    expected_path=Path(__file__).with_name("cut_stream_typescript_client.expected.json"),
)
