"""The capture pipeline, split across two processes so that recording costs the proxy little.

The proxy's hot path (`CaptureClient`, called by the addon) only stamps what it saw and appends
it, already framed, to a queue; a sender thread ships the queue every 50 ms, joined, down a
pipe to a worker process (`python -m analyzer.capture.worker`) that decodes, frames, redacts,
serializes and writes (`Recorder` + `CaptureWriter`, inline: the worker has one thread), on the
other core. Doing that work in the proxy process, even on a thread, halved the proxy's SSE
event rate: the GIL makes every microsecond spent recording a microsecond the event loop does
not forward traffic.

The pipe carries frames (`analyzer.capture.pipe`); the worker is `analyzer.capture.worker`.

The worker owns the capture's numbers, so it also prints the stats line and serves /metrics.

Secrets cross the pipe in memory, between two processes of the same user, and are redacted
before anything reaches disk. The worker exits when the pipe closes; if the proxy died without
saying goodbye, it writes no `capture_close`, so readers see an unclean stop.

The worker's own messages (a write that failed, and its recovery) go straight to the stderr it
shares with the proxy, at once; when records were given up it exits with `EXIT_RECORDS_LOST`,
which the proxy reports as an error at close (the capture is incomplete: exit 1).

If the worker dies first, the proxy keeps forwarding (capture never breaks traffic) but says so
at once, as an error on the `analyzer.capture` logger, and again at close with the number of
records it could not record since. It does not start another worker: the flows in progress
would reach it without their requests and responses.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from analyzer.capture.pipe import (
    CHUNK_TAIL,
    CLOCK,
    COUNTERS,
    EXIT_RECORDS_LOST,
    FLOW_LEN,
    PICKLED,
    Item,
    write_frame,
)
from analyzer.capture.retention import Retention
from analyzer.capture.writer import CaptureError

_pack_chunk_tail = CHUNK_TAIL.pack  # bound once: the hot path looks up nothing it can avoid
_monotonic_ns = time.monotonic_ns
# 50 ms, not 10: fewer wake-ups of the sender (and GIL hand-offs) in the proxy and of the worker,
# in bigger batches; measured 0.6-1 µs less proxy CPU per SSE event (bench/proxy_bench.py).
# Well inside the durability bound: a record is shipped within 50 ms and synced within the
# writer's flush interval after that.
_SEND_INTERVAL_S = 0.05
_READY_TIMEOUT_S = 30.0
# Linux: a 1 MiB pipe holds a shipment at full rate, so the sender rarely waits on the worker.
_F_SETPIPE_SZ = 1031
_PIPE_SIZE = 1 << 20

log = logging.getLogger(__name__)

# The worker's command line. `-P`: nothing from the current folder is imported (`-m` and `-c`
# would put it first on sys.path, so a `queue.py` there would run in the worker). The package
# is found as in this process: installed, or from the source tree the addon was loaded from
# (`mitmdump -s addons/seamwatch_capture.py`), which is put first as the addon puts it.
_WORKER = """\
import sys
root = sys.argv[1]
if root not in sys.path:
    sys.path.insert(0, root)
from analyzer.capture.worker import main
sys.exit(main())
"""


def _now() -> tuple[int, int]:
    return time.time_ns(), time.monotonic_ns()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
        retention: Retention | None = None,
        stats_interval_s: float | None = None,
        metrics: tuple[str, int] | None = None,
    ) -> None:
        self.queue_max = queue_max
        # A deque of frames: append and popleft are atomic, so the hot path takes no lock.
        # Counters are written by the hot path only; the sender ships their growth since its
        # last shipment.
        self._items: deque[bytes] = deque()
        self._flow_heads: dict[str, bytes] = {}  # a chunk frame's start, per streaming flow
        self._dropped = self._errors = 0
        self._dropped_sent = self._errors_sent = 0
        self._closed = False
        self._finished = False
        # Set when the worker died before close: what was dropped until then, and the records
        # of shipments that did not reach it.
        self._died = False
        self._dropped_at_death = self._unshipped = 0
        self._out_dir = out_dir
        self._wake = threading.Event()
        self._rotate = False
        root = str(Path(__file__).resolve().parents[2])
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _WORKER, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._pipe = self._proc.stdin
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._pipe.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)
        config = {
            "out_dir": str(out_dir),
            "open_fields": open_fields,
            "redact": redact,
            "replica_header": replica_header,
            "rotate_bytes": rotate_bytes,
            "flush_interval_s": flush_interval_s,
            "retention": retention,
            "stats_interval_s": stats_interval_s,
            "metrics": metrics,
        }
        write_frame(self._pipe, config)
        ready = self._proc.stdout.readline().decode("utf-8", "replace").strip()
        if ready != "ready":
            self._proc.wait(_READY_TIMEOUT_S)
            raise CaptureError(ready or f"capture worker exited with {self._proc.returncode}")
        self._sender = threading.Thread(target=self._send_loop, name="seamwatch-send", daemon=True)
        self._sender.start()

    # -- the hot path: called on the proxy's event loop ------------------------------------

    def _put(self, item: Item) -> None:
        if len(self._items) < self.queue_max and not self._closed:
            data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            self._items.append(b"P" + PICKLED.pack(len(data)) + data)
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
        # The hottest path of all, once per chunk: one clock read, one frame, one append.
        items = self._items
        if len(items) < self.queue_max and not self._closed:
            try:
                head = self._flow_heads[flow]
            except KeyError:
                head = self._flow_head(flow)
            items.append(head + _pack_chunk_tail(_monotonic_ns(), len(raw)) + raw)
        else:
            self._dropped += 1

    def _flow_head(self, flow: str) -> bytes:
        encoded = flow.encode("utf-8", "surrogatepass")
        head = self._flow_heads[flow] = b"C" + FLOW_LEN.pack(len(encoded)) + encoded
        return head

    def stream_end(self, flow: str, how: str, error: str | None = None) -> None:
        """How a response ended, or why none came."""
        self._flow_heads.pop(flow, None)
        self._put(("end", _now(), flow, how, error))

    def server_unreachable(self, upstream: str, error: str) -> None:
        """A failed connection to the upstream."""
        self._put(("unreachable", _now(), upstream, error))

    def count_error(self) -> None:
        """Count a failure of the proxy-side capture path."""
        self._errors += 1

    def rotate(self) -> None:
        """Have the worker close the current capture file and open the next, after what is
        queued now (SIGHUP). Safe from a signal handler: it only sets a flag."""
        self._rotate = True

    # -- shipping -------------------------------------------------------------------------

    def _take(self) -> tuple[bytes, int]:
        """Everything queued, framed, after a clock frame (and a counters frame if they grew);
        and how many records that is."""
        popleft = self._items.popleft
        frames = [b"T" + CLOCK.pack(*_now())]
        dropped, errors = self._dropped, self._errors
        if (dropped, errors) != (self._dropped_sent, self._errors_sent):
            delta = (dropped - self._dropped_sent, errors - self._errors_sent)
            self._dropped_sent, self._errors_sent = dropped, errors
            frames.append(b"N" + COUNTERS.pack(*delta))
        records = len(self._items)
        frames += [popleft() for _ in range(records)]
        if self._rotate:
            self._rotate = False
            frames.append(b"R")
        return (b"".join(frames) if len(frames) > 1 else b""), records

    def _send_loop(self) -> None:
        while not self._wake.wait(_SEND_INTERVAL_S):
            # A worker that died is noticed within one interval, traffic or not.
            if self._proc.poll() is not None or not self._ship():
                self._worker_died()
                return

    def _ship(self, goodbye: bool = False) -> bool:
        data, records = self._take()
        if goodbye:
            data += b"X"
        if not data:
            return True
        try:
            _write_all(self._pipe.fileno(), data)
        except (OSError, ValueError):  # the worker is gone: nothing more can be recorded
            self._closed = True
            self._unshipped += records
            return False
        return True

    def _worker_died(self) -> None:
        """Stop recording and say so, once; the proxy goes on forwarding."""
        self._closed = True
        if self._died:
            return
        self._died = True
        self._dropped_at_death = self._dropped
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(1)  # a broken pipe comes just before the exit status
        log.error(
            "capture worker died (%s): recording to %s stopped; traffic still passes",
            _exit_text(self._proc.returncode),
            self._out_dir,
        )

    @property
    def worker_died(self) -> bool:
        """Whether the worker died before `close`: the capture is incomplete."""
        return self._died

    @property
    def unrecorded(self) -> int:
        """Records handed over after the worker died (at least that many were not recorded)."""
        if not self._died:
            return 0
        return self._unshipped + len(self._items) + self._dropped - self._dropped_at_death

    def close(self, timeout: float = 60.0) -> None:
        """Ship what is queued, tell the worker to write capture_close, wait for it."""
        if self._finished:
            return
        self._finished = True
        self._wake.set()
        self._sender.join(timeout)
        if not self._died:
            self._closed = True
            if not self._ship(goodbye=True):
                self._worker_died()
        with contextlib.suppress(OSError, ValueError):
            self._pipe.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        if self._died:
            log.error(
                "capture in %s is incomplete: %d records after the worker died were not recorded",
                self._out_dir,
                self.unrecorded,
            )
        elif self._proc.returncode == EXIT_RECORDS_LOST:
            log.error(
                "capture in %s is incomplete: records that could not be written were lost "
                "(counted in its capture_stats as dropped)",
                self._out_dir,
            )


def _exit_text(code: int | None) -> str:
    """'exit 1', 'killed by SIGKILL': how a process ended, for a message."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit {code}"
