"""The capture pipeline, split across two processes so that recording costs the proxy little.

The proxy's hot path (`CaptureClient`, called by the addon) only stamps what it saw and appends
it to a list; a sender thread ships that list every few milliseconds, pickled, down a pipe to a
worker process (`python -m analyzer.capture.pipeline`) that decodes, frames, redacts,
serializes and writes (`Recorder` + `CaptureWriter`), on the other core. Doing that work in the
proxy process, even on a thread, halved the proxy's SSE event rate: the GIL makes every
microsecond spent recording a microsecond the event loop does not forward traffic.

Secrets cross the pipe in memory, between two processes of the same user, and are redacted
before anything reaches disk. The worker exits when the pipe closes; if the proxy died without
saying goodbye, it writes no `capture_close`, so readers see an unclean stop.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from analyzer.capture.recorder import Recorder, StreamTap
from analyzer.capture.redaction import Redactor
from analyzer.capture.writer import CaptureError, CaptureWriter

_LEN = struct.Struct("<Q")
_SEND_INTERVAL_S = 0.01
_READY_TIMEOUT_S = 30.0

Item = tuple[Any, ...]


def _now() -> tuple[int, int]:
    return time.time_ns(), time.monotonic_ns()


def _write_frame(pipe: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_LEN.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def _read_frame(pipe: IO[bytes]) -> Any:
    head = pipe.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (size,) = _LEN.unpack(head)
    data = pipe.read(size)
    if len(data) < size:
        return None  # torn by a dying proxy: what came before is already written
    return pickle.loads(data)  # our own parent process wrote it


class CaptureClient:
    """The proxy's side: stamps what passed and queues it for the worker; never blocks."""

    def __init__(
        self,
        out_dir: Path,
        *,
        open_fields: dict[str, object],
        redact: bool = True,
        replica_header: str | None = None,
        rotate_bytes: int = 64 << 20,
        flush_interval_s: float = 0.2,
        queue_max: int = 200_000,
    ) -> None:
        self.queue_max = queue_max
        # A deque: append and popleft are atomic, so the hot path takes no lock. Counters are
        # written by the hot path only; the sender ships their growth since its last batch.
        self._items: deque[Item] = deque()
        self._dropped = self._errors = 0
        self._dropped_sent = self._errors_sent = 0
        self._closed = False
        self._wake = threading.Event()
        # The worker imports this package the way this process did, even when the addon was
        # loaded as a script from a source tree (`mitmdump -s addons/seamwatch_capture.py`).
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "analyzer.capture.pipeline"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._pipe = self._proc.stdin
        config = {
            "out_dir": str(out_dir),
            "open_fields": open_fields,
            "redact": redact,
            "replica_header": replica_header,
            "rotate_bytes": rotate_bytes,
            "flush_interval_s": flush_interval_s,
        }
        _write_frame(self._pipe, config)
        ready = self._proc.stdout.readline().decode("utf-8", "replace").strip()
        if ready != "ready":
            self._proc.wait(_READY_TIMEOUT_S)
            raise CaptureError(ready or f"capture worker exited with {self._proc.returncode}")
        self._sender = threading.Thread(target=self._send_loop, name="seamwatch-send", daemon=True)
        self._sender.start()

    # -- the hot path: called on the proxy's event loop ------------------------------------

    def _put(self, item: Item) -> None:
        if len(self._items) < self.queue_max and not self._closed:
            self._items.append(item)
        else:
            self._dropped += 1

    def request(self, flow: str, **fields: object) -> None:
        """A request and its decoded body (fields as `Recorder.request` takes them)."""
        self._put(("request", _now(), flow, fields))

    def response(self, flow: str, **fields: object) -> None:
        """A response's head (and body unless streamed; fields as `Recorder.response`)."""
        self._put(("response", _now(), flow, fields))

    def chunk(self, flow: str, raw: bytes) -> None:
        """Raw bytes of a streamed response, as they went to the client."""
        # The hottest path of all, once per chunk: _put and _now inlined.
        if len(self._items) < self.queue_max and not self._closed:
            self._items.append(("chunk", (time.time_ns(), time.monotonic_ns()), flow, raw))
        else:
            self._dropped += 1

    def stream_end(self, flow: str, how: str, error: str | None = None) -> None:
        """How a response ended, or why none came."""
        self._put(("end", _now(), flow, how, error))

    def server_unreachable(self, upstream: str, error: str) -> None:
        """A failed connection to the upstream."""
        self._put(("unreachable", _now(), upstream, error))

    def count_error(self) -> None:
        """Count a failure of the proxy-side capture path."""
        self._errors += 1

    # -- shipping -------------------------------------------------------------------------

    def _take(self) -> tuple[int, int, list[Item]]:
        popleft = self._items.popleft
        items = [popleft() for _ in range(len(self._items))]
        dropped, errors = self._dropped, self._errors
        delta = (dropped - self._dropped_sent, errors - self._errors_sent)
        self._dropped_sent, self._errors_sent = dropped, errors
        return delta[0], delta[1], items

    def _send_loop(self) -> None:
        while not self._wake.wait(_SEND_INTERVAL_S):
            if not self._ship():
                return

    def _ship(self) -> bool:
        dropped, errors, items = self._take()
        if not (items or dropped or errors):
            return True
        try:
            _write_frame(self._pipe, ("batch", dropped, errors, items))
        except (OSError, ValueError):  # the worker is gone: nothing more can be recorded
            self._closed = True
            return False
        return True

    def close(self, timeout: float = 60.0) -> None:
        """Ship what is queued, tell the worker to write capture_close, wait for it."""
        if self._closed and self._proc.poll() is not None:
            return
        self._wake.set()
        self._sender.join(timeout)
        self._closed = True
        self._ship()
        try:
            _write_frame(self._pipe, ("close",))
            self._pipe.close()
        except (OSError, ValueError):
            pass
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)


class _Worker:
    """The worker's side: replays the proxy's items into the recorder and the writer."""

    def __init__(self, config: dict[str, Any]) -> None:
        redactor = Redactor(enabled=config["redact"], key=secrets.token_bytes(32))
        self.writer = CaptureWriter(
            Path(config["out_dir"]),
            open_fields={**config["open_fields"], "redaction": redactor.policy()},
            rotate_bytes=config["rotate_bytes"],
            flush_interval_s=config["flush_interval_s"],
        )
        self.recorder = Recorder(self.writer, redactor, replica_header=config["replica_header"])
        self.taps: dict[str, StreamTap] = {}

    def apply(self, item: Item) -> None:
        kind, at = item[0], item[1]
        if kind == "chunk":
            tap = self.taps.get(item[2])
            if tap is not None:
                tap.feed(item[3], at)
        elif kind == "request":
            self.recorder.request(item[2], at=at, **item[3])
        elif kind == "response":
            tap = self.recorder.response(item[2], at=at, **item[3])
            if tap is not None:
                self.taps[item[2]] = tap
        elif kind == "end":
            tap = self.taps.pop(item[2], None)
            if tap is not None:
                tap.end(item[3], item[4], at)
            else:
                self.recorder.stream_end(item[2], item[3], item[4], at=at)
        elif kind == "unreachable":
            self.recorder.server_unreachable(item[2], item[3], at=at)

    def finish(self, *, clean: bool) -> None:
        for tap in self.taps.values():
            tap.end("open_at_shutdown")
        self.taps.clear()
        if clean:
            self.writer.close()
        else:
            self.writer.abandon()


def main() -> int:
    """`python -m analyzer.capture.pipeline`: the worker, fed by its parent on stdin."""
    # The proxy decides when the capture ends (by closing the pipe), not a signal sent to
    # the whole process group by a terminal or a supervisor.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # When the cores are saturated the proxy goes first: the worker lags behind (its input is
    # queued, bounded, in the proxy) and catches up when the traffic lets it.
    with contextlib.suppress(OSError):
        os.nice(10)
    stdin, stdout = sys.stdin.buffer, sys.stdout
    config = _read_frame(stdin)
    if config is None:
        return 2
    try:
        worker = _Worker(config)
        worker.writer.start()
    except (CaptureError, OSError, ValueError) as e:
        print(f"cannot capture to {config['out_dir']}: {e}", file=stdout, flush=True)
        return 2
    print("ready", file=stdout, flush=True)
    while True:
        frame = _read_frame(stdin)
        if frame is None or frame[0] == "close":
            worker.finish(clean=frame is not None)
            return 0
        _, dropped, errors, items = frame
        worker.writer.count_upstream(dropped, errors)
        for item in items:
            try:
                worker.apply(item)
            except Exception:
                worker.writer.count_error()


if __name__ == "__main__":
    sys.exit(main())
