"""The capture pipeline, split across two processes so that recording costs the proxy little.

The proxy's hot path (`CaptureClient`, called by the addon) only stamps what it saw and appends
it, already framed, to a queue; a sender thread ships the queue every 50 ms, joined, down a
pipe to a worker process (`python -m analyzer.capture.pipeline`) that decodes, frames, redacts,
serializes and writes (`Recorder` + `CaptureWriter`, inline: the worker has one thread), on the
other core. Doing that work in the proxy process, even on a thread, halved the proxy's SSE
event rate: the GIL makes every microsecond spent recording a microsecond the event loop does
not forward traffic.

The pipe carries a stream of frames, each a tag byte and fixed little-endian fields:

- `C` a streamed chunk: flow id length (u16), flow id, monotonic ns (i64), length (u32), the
  raw bytes. The hottest path of all, so it reads one clock: the sender stamps each shipment
  with a `T` frame, wall clock and monotonic ns (i64 each) read together, and the worker takes
  a chunk's wall clock as its monotonic time plus that offset. The two differ only if the wall
  clock was stepped in the few milliseconds between the chunk and its shipment.
- `P` anything else (request, response, end of stream, unreachable upstream; once per flow):
  a length (u32) and a pickled tuple. Pickle is safe here: our own parent process wrote it.
- `N` counters: records dropped at the full queue and capture errors (u64 each) since the last.
- `R` rotate: close the current capture file and open the next (the proxy got SIGHUP).
- `X` goodbye: the proxy is closing cleanly.

The worker owns the capture's numbers, so it also prints the stats line (every
`stats_interval_s`, and at close) and, with `metrics`, serves them to Prometheus
(`analyzer.capture.health`).

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
import secrets
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from analyzer.capture.health import MetricsServer, stats_line
from analyzer.capture.recorder import Recorder, StreamTap
from analyzer.capture.redaction import Redactor
from analyzer.capture.retention import Retention
from analyzer.capture.writer import CaptureError, CaptureWriter

_LEN = struct.Struct("<Q")
_FLOW_LEN = struct.Struct("<H")
_CHUNK_TAIL = struct.Struct("<qI")  # after a chunk frame's flow id: mono ns, length
_pack_chunk_tail = _CHUNK_TAIL.pack  # bound once: the hot path looks up nothing it can avoid
_monotonic_ns = time.monotonic_ns
_PICKLED = struct.Struct("<I")
_CLOCK = struct.Struct("<qq")
_COUNTERS = struct.Struct("<QQ")
_TAG_CHUNK, _TAG_PICKLED, _TAG_CLOCK, _TAG_COUNTERS, _TAG_ROTATE, _TAG_CLOSE = b"CPTNRX"
# 50 ms, not 10: fewer wake-ups of the sender (and GIL hand-offs) in the proxy and of the worker,
# in bigger batches; measured 0.6-1 µs less proxy CPU per SSE event (bench/proxy_bench.py).
# Well inside the durability bound: a record is shipped within 50 ms and synced within the
# writer's flush interval after that.
_SEND_INTERVAL_S = 0.05
_READY_TIMEOUT_S = 30.0
_READ_SIZE = 1 << 20
# Linux: a 1 MiB pipe holds a shipment at full rate, so the sender rarely waits on the worker.
_F_SETPIPE_SZ = 1031
_PIPE_SIZE = 1 << 20
# The worker's exit status when its writer gave records up after failed writes.
EXIT_RECORDS_LOST = 3

Item = tuple[Any, ...]

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
from analyzer.capture.pipeline import main
sys.exit(main())
"""


def _now() -> tuple[int, int]:
    return time.time_ns(), time.monotonic_ns()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_frame(pipe: IO[bytes], obj: object) -> None:
    """The configuration, the first thing on the pipe: a length and a pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_LEN.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def _read_exact(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = os.read(fd, size - len(data))
        if not piece:
            break
        data += piece
    return data


def _read_frame(fd: int) -> Any:
    """The configuration: read from the file descriptor itself, so nothing is buffered."""
    head = _read_exact(fd, _LEN.size)
    if len(head) < _LEN.size:
        return None
    (size,) = _LEN.unpack(head)
    data = _read_exact(fd, size)
    if len(data) < size:
        return None
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
            data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            self._items.append(b"P" + _PICKLED.pack(len(data)) + data)
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
        head = self._flow_heads[flow] = b"C" + _FLOW_LEN.pack(len(encoded)) + encoded
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
        frames = [b"T" + _CLOCK.pack(*_now())]
        dropped, errors = self._dropped, self._errors
        if (dropped, errors) != (self._dropped_sent, self._errors_sent):
            delta = (dropped - self._dropped_sent, errors - self._errors_sent)
            self._dropped_sent, self._errors_sent = dropped, errors
            frames.append(b"N" + _COUNTERS.pack(*delta))
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


class _SayOnStderr(logging.Handler):
    """The worker's capture messages on the stderr it shares with the proxy, as the proxy's
    own: one `seamwatch:` line each, at once."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"seamwatch: {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


class _Worker:
    """The worker's side: replays the proxy's frames into the recorder and the writer."""

    def __init__(self, config: dict[str, Any]) -> None:
        redactor = Redactor(enabled=config["redact"], key=secrets.token_bytes(32))
        self.writer = CaptureWriter(
            Path(config["out_dir"]),
            open_fields={**config["open_fields"], "redaction": redactor.policy()},
            rotate_bytes=config["rotate_bytes"],
            flush_interval_s=config["flush_interval_s"],
            retention=config.get("retention"),
        )
        self.recorder = Recorder(self.writer, redactor, replica_header=config["replica_header"])
        self.taps: dict[str, StreamTap] = {}
        self.wall_offset = time.time_ns() - time.monotonic_ns()
        self.closed = False
        self._chunk_frames: dict[int, struct.Struct] = {}
        self.bytes = 0
        # Write lag: the monotonic time of the oldest record fed since the last write.
        self._oldest: int | None = None
        self.write_lag_s = 0.0
        self.stats_interval_s: float | None = config.get("stats_interval_s")
        self.stats_due = time.monotonic() + (self.stats_interval_s or 0)
        self.metrics = MetricsServer(self.health)

    def health(self) -> dict[str, float]:
        """The numbers of the stats line and of /metrics (`analyzer.capture.health`)."""
        counters = self.writer.counters
        return {
            "exchanges": self.recorder.exchanges,
            "sse_events": self.recorder.events,
            "bytes": self.bytes,
            "written": counters["written"],
            "dropped": counters["dropped"],
            "redacted": counters["redacted"],
            "addon_errors": counters["addon_errors"],
            "files": self.writer.files,
            "files_deleted": self.writer.files_deleted,
            "write_lag_seconds": self.write_lag_s,
        }

    def say_stats(self) -> None:
        if self.stats_interval_s is not None:
            print(f"seamwatch: stats: {stats_line(self.health())}", file=sys.stderr, flush=True)

    def pump(self) -> float:
        """Write what was fed, measure the lag, print stats when due; seconds until due again."""
        due = self.writer.pump()
        now_ns = time.monotonic_ns()
        if self._oldest is not None:
            self.write_lag_s = max(0, now_ns - self._oldest) / 1e9
            if not self.writer.holding:
                self._oldest = None
        else:
            self.write_lag_s = 0.0
        if self.stats_interval_s:  # 0: at close only
            now = now_ns / 1e9
            if now >= self.stats_due:
                self.say_stats()
                self.stats_due = now + self.stats_interval_s
            due = min(due, max(0.0, self.stats_due - now))
        return due

    def _seen(self, mono: int) -> None:
        if self._oldest is None or mono < self._oldest:
            self._oldest = mono

    def feed(self, buf: bytes) -> int:
        """Apply the whole frames at the start of `buf`; how many bytes they took."""
        pos, end = 0, len(buf)
        while pos < end:
            tag = buf[pos]
            if tag == _TAG_CHUNK:
                after = self._chunk_run(buf, pos, end)
                if after == pos:
                    break  # a torn frame: wait for the rest
                pos = after
            elif tag == _TAG_CLOCK:
                if pos + 1 + _CLOCK.size > end:
                    break
                wall, mono = _CLOCK.unpack_from(buf, pos + 1)
                self.wall_offset = wall - mono
                pos += 1 + _CLOCK.size
            elif tag == _TAG_PICKLED:
                if pos + 1 + _PICKLED.size > end:
                    break
                (size,) = _PICKLED.unpack_from(buf, pos + 1)
                at = pos + 1 + _PICKLED.size
                if at + size > end:
                    break
                item = pickle.loads(buf[at : at + size])  # our own parent process wrote it
                pos = at + size
                self._seen(item[1][1])
                self.guarded(self.apply, item)
            elif tag == _TAG_COUNTERS:
                if pos + 1 + _COUNTERS.size > end:
                    break
                self.writer.count_upstream(*_COUNTERS.unpack_from(buf, pos + 1))
                pos += 1 + _COUNTERS.size
            elif tag == _TAG_ROTATE:
                self.writer.rotate()
                pos += 1
            elif tag == _TAG_CLOSE:
                self.closed = True
                return end
            else:
                raise ValueError(f"capture pipe out of step: tag {tag:#x} at {pos}")
        return pos

    def _chunk_run(self, buf: bytes, pos: int, end: int) -> int:
        """Hand the run of whole chunk frames of one flow at `pos` to its tap; where it ends."""
        if pos + 1 + _FLOW_LEN.size > end:
            return pos
        head_size = 1 + _FLOW_LEN.size + _FLOW_LEN.unpack_from(buf, pos + 1)[0]
        head = buf[pos : pos + head_size]
        frame = self._chunk_frames.get(head_size)
        if frame is None:  # one struct per flow id length: the whole header in one unpack
            frame = self._chunk_frames[head_size] = struct.Struct(f"<{head_size}sqI")
        unpack, size = frame.unpack_from, frame.size
        raws: list[bytes] = []
        monos: list[int] = []
        while pos + size <= end:
            this_head, mono, length = unpack(buf, pos)
            if this_head != head:
                break  # another flow's chunk, or another frame
            start = pos + size
            stop = start + length
            if stop > end:
                break
            raws.append(buf[start:stop])
            monos.append(mono)
            pos = stop
        if raws:
            self.chunks(head[1 + _FLOW_LEN.size :], raws, monos)
        return pos

    def guarded(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except Exception:
            self.writer.count_error()

    def chunks(self, flow_id: bytes, raws: list[bytes], monos: list[int]) -> None:
        self.bytes += sum(map(len, raws))
        self._seen(monos[0])
        tap = self.taps.get(flow_id.decode("utf-8", "surrogatepass"))
        if tap is not None:
            self.guarded(tap.feed_many, raws, monos, self.wall_offset)

    def apply(self, item: Item) -> None:
        kind, at = item[0], item[1]
        if kind == "request":
            self._count_body(item[3])
            self.recorder.request(item[2], at=at, **item[3])
        elif kind == "response":
            self._count_body(item[3])
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

    def _count_body(self, fields: dict[str, Any]) -> None:
        body = fields.get("body")
        if isinstance(body, bytes):
            self.bytes += len(body)

    def finish(self, *, clean: bool) -> int:
        """Close the capture; the worker's exit status (`EXIT_RECORDS_LOST` after a loss)."""
        for tap in self.taps.values():
            tap.end("open_at_shutdown")
        self.taps.clear()
        if clean:
            self.writer.close()
        else:
            self.writer.abandon()
        self.metrics.close()
        self._oldest = None
        self.write_lag_s = 0.0
        self.say_stats()
        return EXIT_RECORDS_LOST if self.writer.lost else 0


def main() -> int:
    """`python -m analyzer.capture.pipeline`: the worker, fed by its parent on stdin."""
    # The proxy decides when the capture ends (by closing the pipe), not a signal sent to
    # the whole process group by a terminal or a supervisor.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # SIGHUP rotates the capture: the proxy's to handle (it tells this worker, in order).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # When the cores are saturated the proxy goes first: the worker lags behind (its input is
    # queued, bounded, in the proxy) and catches up when the traffic lets it.
    with contextlib.suppress(OSError):
        os.nice(10)
    capture_log = logging.getLogger("analyzer.capture")
    capture_log.addHandler(_SayOnStderr(logging.WARNING))
    capture_log.propagate = False
    stdin, stdout = sys.stdin.fileno(), sys.stdout
    config = _read_frame(stdin)
    if config is None:
        return 2
    try:
        worker = _Worker(config)
        # This process does nothing but record: its one thread writes too (`pump`), each
        # batch as soon as it is recorded, and syncs on the writer's cadence.
        if config.get("metrics"):
            host, port = config["metrics"]
            worker.metrics.start(host, port)
        worker.writer.start(inline=True)
    except (CaptureError, OSError, ValueError) as e:
        print(f"cannot capture to {config['out_dir']}: {e}", file=stdout, flush=True)
        return 2
    print("ready", file=stdout, flush=True)
    poll = select.poll()
    poll.register(stdin, select.POLLIN)
    buf = b""
    while True:
        try:
            used = worker.feed(buf)
        except ValueError:  # out of step: what came before is written, the rest is not ours
            worker.writer.count_error()
            worker.finish(clean=False)
            return 1
        buf = buf[used:]
        if worker.closed:
            return worker.finish(clean=True)
        # Write what was recorded; wait for input no longer than the next sync is due.
        while not poll.poll(worker.pump() * 1000 + 1):
            pass
        data = os.read(stdin, _READ_SIZE)
        if not data:  # the proxy died without a goodbye; a torn last frame is dropped
            return worker.finish(clean=False)
        buf += data  # the unparsed rest is at most a frame


if __name__ == "__main__":
    sys.exit(main())
