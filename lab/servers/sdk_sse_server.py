"""The lab's official-SDK server on the legacy HTTP+SSE transport (2024-11-05), one process.

    python -m lab.servers.sdk_sse_server --port N

The same `MCPServer` and tools as `lab.servers.sdk_server`, served by the SDK's `sse_app()`
(`SseServerTransport`): `GET /sse` opens the stream whose first event is `endpoint`
(`/messages/?session_id=<hex>`); the client POSTs every message there (202) and every server
message arrives on the GET stream. No event ids, no resumption. No control plane: the legacy
scenarios need none.
"""

from __future__ import annotations

import argparse

import uvicorn

from lab.servers.sdk_server import LabState, build_server

SSE_PATH = "/sse"
MESSAGE_PATH = "/messages/"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    mcp = build_server(LabState(None, charge_gate=False))
    app = mcp.sse_app(sse_path=SSE_PATH, message_path=MESSAGE_PATH)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
