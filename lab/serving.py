"""The start-up every lab server shares: its ASGI app on 127.0.0.1, stopped promptly."""

from __future__ import annotations

import logging
from typing import Any

import uvicorn


def serve(app: Any, port: int, *, log_requests: bool = True, **options: Any) -> None:
    """Serve `app` on 127.0.0.1:`port` until SIGTERM/SIGINT.

    Loopback only: the lab never listens beyond this machine. A one-second graceful shutdown,
    so the lab's stop (SIGTERM, then SIGKILL after a bound) ends open SSE streams at once;
    no `Server` header, so replicas are told apart by the headers the lab sets. With
    `log_requests`, the server's own INFO lines go to stderr, which the lab keeps per process.
    """
    if log_requests:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=1,
        server_header=False,
        **options,
    )
