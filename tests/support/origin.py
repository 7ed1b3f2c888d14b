"""A scriptable HTTP/1.1 origin on 127.0.0.1 for proxy tests: exact bytes, exact pacing.

Each response body is a list of writes; between writes the origin waits for the test to call
`step()` (no sleeps to race), so a test can prove the client received write k before write
k+1 exists. The origin can also die mid-body (close the socket without the last chunk).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field


@dataclass
class Script:
    """What the origin answers on one path."""

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    writes: list[bytes] = field(default_factory=list)
    chunked: bool = True
    paced: bool = False  # wait for step() before each write after the first
    die_after: int | None = None  # close the socket after this many writes, mid-body


class Origin:
    """Runs an asyncio server in a thread; `scripts` maps a path to its Script."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._steps: asyncio.Queue[None] | None = None
        self._server: asyncio.base_events.Server | None = None
        self.client_gone = threading.Event()

    def __enter__(self) -> Origin:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def step(self) -> None:
        """Let a paced response make its next write."""
        assert self._steps is not None
        self._loop.call_soon_threadsafe(self._steps.put_nowait, None)

    async def _start(self) -> None:
        self._steps = asyncio.Queue()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = b""
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                self.requests.append((method, path, headers, body))
                if not await self._answer(path, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, writer: asyncio.StreamWriter) -> bool:
        script = self.scripts.get(path.split("?", 1)[0]) or Script(status=404, writes=[b"no"])
        head = [f"HTTP/1.1 {script.status} X"]
        head += [f"{k}: {v}" for k, v in script.headers]
        if script.chunked:
            head.append("Transfer-Encoding: chunked")
        else:
            head.append(f"Content-Length: {sum(len(w) for w in script.writes)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        assert self._steps is not None
        try:
            for i, data in enumerate(script.writes):
                if script.die_after is not None and i == script.die_after:
                    writer.transport.abort()
                    return False
                if script.paced and i > 0:
                    await self._steps.get()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data) if script.chunked else data)
                await writer.drain()
            if script.chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except ConnectionError:
            self.client_gone.set()
            return False
        return True
