"""The lab's official-SDK Streamable HTTP server (`mcp` MCPServer), one process per scenario.

    python -m lab.servers.sdk_server --port N [--event-ids counter|uuid|none] [--retry-ms MS]
                                     [--max-events N] [--charge-gate] [--stateless]
                                     [--json-response] [--also-port N ...]

The endpoint is `/mcp`; the SDK routes each request by `MCP-Protocol-Version` to the sessioned
(2025) or the sessionless (2026-07-28) transport; with `--stateless` the 2025 one is the SDK's
`stateless_http` (no `Mcp-Session-Id`, no GET stream, no event store); with `--json-response`
the SDK answers each POST with one `application/json` body instead of an event stream. Besides
MCP it serves a small control plane that scenarios use directly, never through the proxy, so
captures hold only MCP traffic:

    GET  /lab/state         charges made, the event store's contents and replays
    POST /lab/gates/{name}  open a gate a tool is waiting on (how scenarios synchronize)

Tools: `charge_card` (side-effecting: no annotations), `create_ticket` (side-effecting, asks
for confirmation by elicitation: MRTR on 2026-07-28), `get_balance` (read-only), `slow_report`
(streams `notifications/progress`; can close its SSE stream server-side for a `retry`
resume), `announce` (a `notifications/message` on the standalone GET stream) and
`drop_standalone_stream` (the server closes the standalone GET stream).

With `--also-port`, the one server (its sessions, its event store) also listens on each given
port, and every listener names itself in `X-Served-By` (`replica-a` on `--port`, then
`replica-b`, ...): replicas that share their session state and event log, as replicas backed by
one shared store do.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import warnings
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.streamable_http import GET_STREAM_KEY
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ToolAnnotations
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lab.servers.event_store import LabEventStore

LISTENER_WAIT_S = 5.0


class Confirmation(BaseModel):
    """What `create_ticket` asks the user before it files anything."""

    confirm: bool


class LabState:
    """Process-wide state the scenarios observe through `/lab/state`."""

    def __init__(self, event_store: LabEventStore | None, *, charge_gate: bool) -> None:
        self.event_store = event_store
        self.charge_gate = charge_gate
        self.charges: list[dict[str, object]] = []
        self.tickets: list[str] = []
        self.gates: dict[str, anyio.Event] = {}

    def gate(self, name: str) -> anyio.Event:
        return self.gates.setdefault(name, anyio.Event())

    def snapshot(self) -> dict[str, object]:
        return {
            "charges": self.charges,
            "tickets": self.tickets,
            "gates": {name: event.is_set() for name, event in self.gates.items()},
            "event_store": None if self.event_store is None else self.event_store.snapshot(),
        }


def ask_confirmation(title: str) -> Elicit[Confirmation]:
    """Resolver: every ticket is confirmed by the user first."""
    return Elicit(f"File the ticket {title!r}?", Confirmation)


def build_server(state: LabState) -> MCPServer:
    """The MCPServer with the lab's tools and control routes."""
    mcp = MCPServer("seamwatch-lab", version="1")

    @mcp.tool()
    async def charge_card(card: str, amount_cents: int, ctx: Context) -> str:
        """Charge a card. Side-effecting and not idempotent: every call charges again."""
        number = len(state.charges) + 1
        charge: dict[str, object] = {
            "n": number,
            "card": card,
            "amount_cents": amount_cents,
            "request_id": ctx.request_id,
            "outcome": "pending",
        }
        state.charges.append(charge)  # the side effect: the card is charged from here on
        try:
            await ctx.report_progress(1, 2, f"charge {number} submitted")
            if state.charge_gate:
                # The payment gateway confirms only when the scenario opens the gate.
                await state.gate("charge-settle").wait()
            await ctx.report_progress(2, 2, f"charge {number} settled")
        except anyio.get_cancelled_exc_class():
            charge["outcome"] = "cancelled"  # the request was cancelled; the charge stands
            raise
        charge["outcome"] = "settled"
        return f"charged {amount_cents} cents to {card} (charge {number})"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    async def create_ticket(
        title: str, confirmation: Annotated[Confirmation, Resolve(ask_confirmation)]
    ) -> str:
        """File a support ticket after the user confirms it (elicitation)."""
        if not confirmation.confirm:
            return f"ticket {title!r} not filed"
        state.tickets.append(title)
        return f"ticket {len(state.tickets)} filed: {title}"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def get_balance(account: str) -> str:
        """Read an account balance; changes nothing."""
        return f"balance of {account}: {100 * len(account)} cents"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def slow_report(
        steps: int, ctx: Context, close_after: int = 0, hold_after: int = 0
    ) -> str:
        """Stream `steps` progress notifications; optionally close the SSE stream midway.

        With `close_after` = k, after progress k the tool waits for gate "slow-report" (opened
        once the client has seen progress k) and then closes its SSE stream server-side
        (2025-11-25 polling): the rest is stored and replayed when the client resumes. With
        `hold_after` = k, after progress k it waits for gate "side-by-side" (opened by the
        client once every call it holds open has sent progress k): streams open at once.
        """
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            if step == hold_after:
                await state.gate("side-by-side").wait()
            if step == close_after:
                await state.gate("slow-report").wait()
                await ctx.close_sse_stream()
        return f"report done in {steps} steps"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
    async def announce(text: str, ctx: Context) -> str:
        """Send `text` as a `notifications/message` on the session's standalone GET stream."""
        await _wait_for_standalone_listener(mcp, ctx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            # No related request id: on the 2025 wire this goes to the standalone stream.
            await ctx.session.send_log_message(level="info", data=text, logger="lab")
        return f"announced {text!r}"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
    async def drop_standalone_stream(ctx: Context) -> str:
        """Close the standalone GET stream server-side (the session stays)."""
        await ctx.close_standalone_sse_stream()
        return "standalone stream closed"

    @mcp.custom_route("/lab/state", methods=["GET"])
    async def lab_state(request: Request) -> Response:
        return JSONResponse({**state.snapshot(), "standalone_listeners": _listeners(mcp)})

    @mcp.custom_route("/lab/gates/{name}", methods=["POST"])
    async def open_gate(request: Request) -> Response:
        state.gate(request.path_params["name"]).set()
        return JSONResponse({"opened": request.path_params["name"]})

    return mcp


def _listeners(mcp: MCPServer) -> list[str]:
    """Sessions whose standalone GET stream is registered (listening) right now.

    The SDK registers a GET stream in a task that races with sending its response headers, so
    a client that saw the 200 cannot know the server listens yet; scenarios and `announce`
    wait on this instead. It reads SDK internals (`_server_instances`, `_request_streams`):
    acceptable in a lab server, and a change there fails loudly.
    """
    instances: dict[str, Any] = mcp.session_manager._server_instances
    return sorted(
        session_id
        for session_id, transport in instances.items()
        if GET_STREAM_KEY in transport._request_streams
    )


async def _wait_for_standalone_listener(mcp: MCPServer, ctx: Context) -> None:
    """Wait until this session's GET stream listens, so a notification is delivered live."""
    session_id = (ctx.headers or {}).get("mcp-session-id")
    if session_id is None:
        return
    with anyio.fail_after(LISTENER_WAIT_S):
        while session_id not in _listeners(mcp):
            await anyio.sleep(0.01)


def served_by(app: ASGIApp, name: str) -> ASGIApp:
    """`app`, its HTTP responses carrying `X-Served-By: name`."""
    header = (b"x-served-by", name.encode("ascii"))

    async def named(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        await app(scope, receive, send_named if scope["type"] == "http" else send)

    return named


async def serve_replicas(app: ASGIApp, ports: list[int]) -> None:
    """Serve `app` on every port, as replica-a, replica-b, ... sharing it.

    Every socket listens from the start (a request arriving early waits in its backlog); the
    first listener runs the app's lifespan (the session manager), the others serve only once it
    has started.
    """
    sockets = [socket.create_server(("127.0.0.1", port)) for port in ports]
    servers = [
        uvicorn.Server(
            uvicorn.Config(
                served_by(app, f"replica-{chr(ord('a') + index)}"),
                log_level="warning",
                lifespan="on" if index == 0 else "off",
            )
        )
        for index in range(len(ports))
    ]
    first = asyncio.create_task(servers[0].serve(sockets=[sockets[0]]))
    while not servers[0].started and not first.done():
        await asyncio.sleep(0.01)
    rest = [
        server.serve(sockets=[sock]) for server, sock in zip(servers[1:], sockets[1:], strict=True)
    ]
    await asyncio.gather(first, *rest)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--event-ids", choices=["counter", "uuid", "none"], default="counter")
    parser.add_argument("--seed", type=int, default=0, help="seed of the uuid event ids")
    parser.add_argument("--retry-ms", type=int, default=None, help="SSE retry in priming events")
    parser.add_argument("--max-events", type=int, default=None, help="bound of the event store")
    parser.add_argument(
        "--charge-gate", action="store_true", help="charge_card waits for gate charge-settle"
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="2025 wire without sessions (stateless_http: no Mcp-Session-Id, no event store)",
    )
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="answer POSTs with application/json bodies, not event streams (json_response)",
    )
    parser.add_argument(
        "--also-port",
        type=int,
        action="append",
        default=[],
        help="listen on this port too, as another replica sharing this server's state",
    )
    args = parser.parse_args(argv)
    event_store = (
        None
        if args.event_ids == "none" or args.stateless
        else LabEventStore(ids=args.event_ids, seed=args.seed, max_events=args.max_events)
    )
    state = LabState(event_store, charge_gate=args.charge_gate)
    mcp = build_server(state)
    app = mcp.streamable_http_app(
        event_store=event_store,
        retry_interval=args.retry_ms,
        session_idle_timeout=None,
        stateless_http=args.stateless,
        json_response=args.json_response,
    )
    if args.also_port:
        asyncio.run(serve_replicas(app, [args.port, *args.also_port]))
    else:
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    # Re-import under the module's real name, so the MRTR input-request keys the SDK derives
    # from the resolver read "lab.servers.sdk_server:ask_confirmation", not "__main__:...".
    from lab.servers import sdk_server

    sdk_server.main()
