"""A purpose-built 2026-07-28 (sessionless) Streamable HTTP server that trusts no header check.

What it does right: every request is self-contained (no `initialize`, no `Mcp-Session-Id`),
`server/discover`, `tools/list` and `tools/call` answer `application/json`, GET and DELETE
answer 405 (no standalone stream, no sessions), a request without `MCP-Protocol-Version:
2026-07-28` is refused with 400.

What it does wrong, on purpose (DESIGN.md §1, §5 `header-mismatch`): it never compares the
`Mcp-Method` / `Mcp-Name` headers with the body. A gateway in front routes, authorizes and
rate-limits on those headers; this server executes the body, whatever the headers said (the
official SDK answers 400 instead).

Every response carries `X-Served-By: <replica>`. Control endpoint for the scenarios, called
directly (never through the proxy): `GET /lab/state` (the tool calls executed, with the headers
they came with, and the tickets deleted).

    python -m lab.faults.modern --port 8001 --replica lenient
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lab.faults.server import MCP_PATH, served_by
from lab.faults.server import TOOLS as SESSIONED_TOOLS
from lab.serving import serve

PROTOCOL_VERSION = "2026-07-28"

Json = dict[str, Any]

TOOLS: list[Json] = [
    # The same read-only `lookup` the 2025-11-25 fault server lists (and answers alike).
    next(tool for tool in SESSIONED_TOOLS if tool["name"] == "lookup"),
    {
        "name": "delete_ticket",
        "description": "Delete a support ticket for good.",
        "inputSchema": {
            "type": "object",
            "properties": {"ticket": {"type": "string"}},
            "required": ["ticket"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    },
]


class LenientServer:
    """Answers 2026-07-28 requests from their bodies; keeps what it executed for /lab/state."""

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self.calls: list[Json] = []
        self.deleted: list[str] = []

    async def post(self, request: Request) -> Response:
        if request.headers.get("mcp-protocol-version") != PROTOCOL_VERSION:
            return error(None, -32600, f"MCP-Protocol-Version {PROTOCOL_VERSION} required", 400)
        try:
            message = json.loads(await request.body())
        except ValueError:
            return error(None, -32700, "Parse error", 400)
        if not isinstance(message, dict) or "method" not in message:
            return error(None, -32600, "not a JSON-RPC request", 400)
        if "id" not in message:
            return Response(status_code=202)  # a notification
        method, request_id = message["method"], message["id"]
        params = message.get("params") or {}
        # The fault: Mcp-Method and Mcp-Name are never compared with `method` and `params.name`.
        if method == "server/discover":
            return result(request_id, discovery(self.replica))
        if method == "tools/list":
            return result(request_id, {"tools": TOOLS, "resultType": "complete"})
        if method != "tools/call":
            return error(request_id, -32601, f"method not found: {method}")
        name, arguments = params.get("name"), params.get("arguments") or {}
        self.calls.append(
            {
                "id": request_id,
                "tool": name,
                "mcp_method": request.headers.get("mcp-method"),
                "mcp_name": request.headers.get("mcp-name"),
            }
        )
        if name == "lookup":
            text = f"{arguments.get('key')} = value-of-{arguments.get('key')}"
        elif name == "delete_ticket":
            self.deleted.append(str(arguments.get("ticket")))
            text = f"deleted ticket {arguments.get('ticket')}"
        else:
            return error(request_id, -32602, f"unknown tool: {name}")
        content = [{"type": "text", "text": text}]
        return result(request_id, {"content": content, "isError": False, "resultType": "complete"})

    async def not_allowed(self, request: Request) -> Response:
        """2026-07-28 has no standalone stream and no sessions: GET and DELETE are 405."""
        return Response(status_code=405, headers={"allow": "POST"})

    async def lab_state(self, request: Request) -> JSONResponse:
        return JSONResponse({"replica": self.replica, "calls": self.calls, "deleted": self.deleted})


def discovery(replica: str) -> Json:
    """A `server/discover` result shaped like the official SDK's."""
    return {
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": {"tools": {}},
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": replica, "version": "1"}},
    }


def result(request_id: object, value: Json) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: object, code: int, text: str, status: int = 200) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
    return JSONResponse(body, status_code=status)


def build_app(replica: str) -> Any:
    server = LenientServer(replica)
    app = Starlette(
        routes=[
            Route(MCP_PATH, server.post, methods=["POST"]),
            Route(MCP_PATH, server.not_allowed, methods=["GET", "DELETE"]),
            Route("/lab/state", server.lab_state, methods=["GET"]),
        ]
    )
    return served_by(app, replica)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.faults.modern", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replica", default="lenient", help="X-Served-By value")
    args = parser.parse_args(argv)
    serve(build_app(args.replica), args.port, log_requests=False)


if __name__ == "__main__":
    main()
