"""A round-robin HTTP reverse proxy over lab replicas, streaming bodies through unbuffered.

Each request goes to the next replica in turn, whatever connection it came on (so a client's
requests alternate between replicas; the lab's scenarios count on that order). Request and
response headers pass through except the hop-by-hop ones; response bodies are written chunk by
chunk as the replica sends them, so SSE events reach the client when they are sent. When the
client goes away mid-response the replica's connection is closed too, as a real balancer does,
so the replica sees the disconnect.

    python -m lab.balancer --port 8000 --replica http://127.0.0.1:8001 \
        --replica http://127.0.0.1:8002
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
from typing import Any

import httpx
from starlette.types import Message, Receive, Scope, Send

from lab.serving import serve

# RFC 9110 §7.6.1: connection-specific fields are not forwarded.
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
     b"upgrade"}
)  # fmt: skip
# httpx sets these from the URL and the body it sends.
REQUEST_ONLY = frozenset({b"host", b"content-length"})

log = logging.getLogger("lab.balancer")


class RoundRobin:
    """The ASGI app: request k goes to replica k mod n."""

    def __init__(self, replicas: list[str]) -> None:
        self.replicas = [r.rstrip("/") for r in replicas]
        self.turn = itertools.count()
        self.http: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http":
            await self.forward(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # No read timeout: an SSE stream may stay quiet for as long as it likes.
                timeout = httpx.Timeout(10.0, read=None)
                self.http = httpx.AsyncClient(timeout=timeout)
                for name in ("accept", "accept-encoding", "user-agent"):
                    del self.http.headers[name]  # forward the client's, add none of httpx's
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.http is not None:
                    await self.http.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.http is not None
        n = next(self.turn)
        upstream = self.replicas[n % len(self.replicas)]
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        target = upstream + scope["raw_path"].decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [
            (k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP | REQUEST_ONLY
        ]
        log.info("request %d %s %s -> %s", n, scope["method"], scope["path"], upstream)
        request = self.http.build_request(
            scope["method"], target, headers=headers, content=bytes(body)
        )
        try:
            response = await self.http.send(request, stream=True)
        except httpx.TransportError as exc:
            await _answer(send, 502, f"replica {upstream} unreachable: {exc}\n".encode())
            return
        try:
            headers = [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP]
            start = {"type": "http.response.start", "status": response.status_code}
            await send({**start, "headers": headers})
            await self.pump(response, receive, send)
        finally:
            await response.aclose()  # unread: httpx closes the replica's connection

    async def pump(self, response: httpx.Response, receive: Receive, send: Send) -> None:
        """Copy the body chunk by chunk until it ends or the client leaves."""
        left = asyncio.ensure_future(_disconnected(receive))
        chunks = response.aiter_raw()
        try:
            while True:
                next_chunk = asyncio.ensure_future(anext(chunks, None))
                await asyncio.wait({next_chunk, left}, return_when=asyncio.FIRST_COMPLETED)
                if not next_chunk.done():
                    next_chunk.cancel()
                    log.info("client left; closing the replica's response")
                    return
                chunk = next_chunk.result()
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (OSError, httpx.TransportError) as exc:
            log.info("stream ended early: %s", exc)
        finally:
            left.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _answer(send: Send, status: int, body: bytes) -> None:
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.balancer", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replica", action="append", required=True, help="a replica's base URL")
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line a request is ours
    app: Any = RoundRobin(args.replica)
    serve(app, args.port, date_header=False)


if __name__ == "__main__":
    main()
