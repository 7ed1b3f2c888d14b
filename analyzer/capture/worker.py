"""The capture worker: the process that records what the proxy ships down the pipe.

`CaptureClient` (`analyzer.capture.pipeline`) starts it and feeds it frames
(`analyzer.capture.pipe`); it replays them into `Recorder` + `CaptureWriter`, inline.

The worker owns the capture's numbers, so it also prints the stats line (every
`stats_interval_s`, and at close) and, with `metrics`, serves them to Prometheus
(`analyzer.capture.health`); its own messages go to the stderr it shares with the proxy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import secrets
import select
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Any

from analyzer.capture.health import MetricsServer, stats_line
from analyzer.capture.pipe import (
    CLOCK,
    COUNTERS,
    EXIT_RECORDS_LOST,
    FLOW_LEN,
    PICKLED,
    TAG_CHUNK,
    TAG_CLOCK,
    TAG_CLOSE,
    TAG_COUNTERS,
    TAG_PICKLED,
    TAG_ROTATE,
    Item,
    read_frame,
)
from analyzer.capture.recorder import Recorder, StreamTap
from analyzer.capture.redaction import Redactor
from analyzer.capture.writer import CaptureError, CaptureWriter

_READ_SIZE = 1 << 20


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
            if tag == TAG_CHUNK:
                after = self._chunk_run(buf, pos, end)
                if after == pos:
                    break  # a torn frame: wait for the rest
                pos = after
            elif tag == TAG_CLOCK:
                if pos + 1 + CLOCK.size > end:
                    break
                wall, mono = CLOCK.unpack_from(buf, pos + 1)
                self.wall_offset = wall - mono
                pos += 1 + CLOCK.size
            elif tag == TAG_PICKLED:
                if pos + 1 + PICKLED.size > end:
                    break
                (size,) = PICKLED.unpack_from(buf, pos + 1)
                at = pos + 1 + PICKLED.size
                if at + size > end:
                    break
                item = pickle.loads(buf[at : at + size])  # our own parent process wrote it
                pos = at + size
                self._seen(item[1][1])
                self.guarded(self.apply, item)
            elif tag == TAG_COUNTERS:
                if pos + 1 + COUNTERS.size > end:
                    break
                self.writer.count_upstream(*COUNTERS.unpack_from(buf, pos + 1))
                pos += 1 + COUNTERS.size
            elif tag == TAG_ROTATE:
                self.writer.rotate()
                pos += 1
            elif tag == TAG_CLOSE:
                self.closed = True
                return end
            else:
                raise ValueError(f"capture pipe out of step: tag {tag:#x} at {pos}")
        return pos

    def _chunk_run(self, buf: bytes, pos: int, end: int) -> int:
        """Hand the run of whole chunk frames of one flow at `pos` to its tap; where it ends."""
        if pos + 1 + FLOW_LEN.size > end:
            return pos
        head_size = 1 + FLOW_LEN.size + FLOW_LEN.unpack_from(buf, pos + 1)[0]
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
            self.chunks(head[1 + FLOW_LEN.size :], raws, monos)
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
    """`python -m analyzer.capture.worker`: the worker, fed by its parent on stdin."""
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
    config = read_frame(stdin)
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
