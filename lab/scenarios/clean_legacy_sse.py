"""clean-legacy-sse: a correct session on the legacy HTTP+SSE transport (2024-11-05), SDK server.

The official SDK server (`lab.servers.sdk_sse_server`: `MCPServer.sse_app()`, the SDK's
`SseServerTransport`) behind the proxy, and a raw httpx client: the 2.3 SDK client always
offers its latest handshake version (2025-11-25) in `initialize`, so only a raw client speaks
2024-11-05 on this transport. On the wire:

1. `GET /sse` opens the session's one stream; its first event is `endpoint`, whose data is the
   POST URL `/messages/?session_id=<hex>`.
2. Every client message is a POST to that URL, answered 202; every server message arrives as an
   `event: message` on the GET stream (no SSE ids: nothing is resumable in this era):
   `initialize` (id 1, protocolVersion 2024-11-05), `notifications/initialized`, `tools/list`
   (id 2), `tools/call slow_report {"steps": 3}` with a progress token (id 3: progress 1..3,
   then the result), `tools/call get_balance` (id 4, read-only).
3. The client closes the GET stream once every response arrived, which ends the session.

Every step is correct behaviour: no resumption finding of any severity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

from lab.clients.raw import ClientError, SseStream
from lab.framework import LabContext, LabError, Scenario, python_argv
from lab.servers.sdk_sse_server import SSE_PATH

LEGACY_VERSION = "2024-11-05"
STEPS = 3


async def _drive(ctx: LabContext, root: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        request = http.build_request(
            "GET", root + SSE_PATH, headers={"accept": "text/event-stream"}
        )
        response = await http.send(request, stream=True)
        try:
            stream = SseStream(response)
            if stream.status != 200 or not stream.is_sse:
                raise ClientError(f"GET {SSE_PATH} answered {stream.status}, not an event stream")
            endpoint = await stream.next_event()
            if endpoint is None or endpoint.event != "endpoint":
                raise ClientError(f"the first event is not `endpoint`: {endpoint}")
            post_url = urljoin(root + SSE_PATH, endpoint.data)
            ctx.note("endpoint", endpoint.data)

            async def send(message: dict[str, Any]) -> None:
                answer = await http.post(post_url, json=message)
                if answer.status_code != 202:
                    raise ClientError(f"POST {message.get('method')} answered {answer.status_code}")

            async def request(request_id: int, method: str, params: dict[str, Any]) -> Any:
                await send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
                message = await stream.response_message(request_id)
                if "result" not in message:
                    raise ClientError(f"{method} failed: {message}")
                return message["result"]

            init = await request(
                1,
                "initialize",
                {
                    "protocolVersion": LEGACY_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "seamwatch-lab-legacy-sse", "version": "1"},
                },
            )
            if init.get("protocolVersion") != LEGACY_VERSION:
                raise LabError(f"the server did not agree to {LEGACY_VERSION}: {init}")
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools = await request(2, "tools/list", {})
            ctx.note("tools", sorted(tool["name"] for tool in tools["tools"]))
            report = await request(
                3,
                "tools/call",
                {
                    "name": "slow_report",
                    "arguments": {"steps": STEPS},
                    "_meta": {"progressToken": "p3"},
                },
            )
            progress = [
                m["params"]["progress"]
                for m in (e.message for e in stream.events[1:])
                if m is not None and m.get("method") == "notifications/progress"
            ]
            ctx.note("progress", progress)
            if progress != [1, 2, 3]:
                raise LabError(f"expected progress 1..3 on the GET stream, got {progress}")
            balance = await request(
                4, "tools/call", {"name": "get_balance", "arguments": {"account": "acme"}}
            )
            ctx.note(
                "results",
                [report["content"][0]["text"], balance["content"][0]["text"]],
            )
            ctx.note("event_ids", [e.id for e in stream.events])
        finally:
            await response.aclose()  # the client closes the stream: the session ends


def run(ctx: LabContext) -> None:
    port = ctx.free_port()
    argv = python_argv("lab.servers.sdk_sse_server", "--port", str(port))
    server = ctx.start_process(argv, name="sdk-sse-server", port=port, wait=False)
    root = ctx.start_proxy(f"http://127.0.0.1:{port}")
    ctx.wait_ready(server)
    ctx.run_async(_drive, ctx, root)


SCENARIO = Scenario(
    name="clean-legacy-sse",
    description="a correct 2024-11-05 session on the SDK's legacy HTTP+SSE transport",
    run=run,
    expected_path=Path(__file__).with_name("clean_legacy_sse.expected.json"),
)
