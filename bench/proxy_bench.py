"""Benchmark: SSE events/s and per-event latency, direct vs plain mitmproxy vs seamwatch proxy.

    .venv/bin/python bench/proxy_bench.py [--events N] [--rounds R] [--daemon]

All three paths run side by side in one process tree on 127.0.0.1, interleaved round by round
(the machine is shared and noisy, so the order rotates each round), and the medians over rounds
are printed with the ratios and their spread. The origin writes one SSE event at a time, each
carrying its send time (CLOCK_MONOTONIC, shared by all processes on the host), so latency is
measured end to end at the client. The client is a raw socket that undoes the chunked transfer
coding and counts events, so that it takes as little CPU as possible from the processes under
test; latency is parsed only on the paced streams.

Beside each rate, the CPU time per event of every process on the path (from /proc, all threads),
measured over the stream: what a path costs the machine, whatever else runs on it. The capture
worker lags behind the proxy by design (it runs at nice 10 and catches up when traffic lets it),
so after each seamwatch stream the bench waits for it to go idle and counts all its work there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addons.proxy import CAPTURE_ADDON, Daemon, mitmdump_args  # noqa: E402
from tests.support.proxy import free_port, wait_port  # noqa: E402

PLAIN_STREAMING = """
def responseheaders(flow):
    if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
        flow.response.stream = True
"""

PAYLOAD = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,'
    b'"progress":%d,"total":100000,"message":"working on step %d"},"t":%d}'
)
PATHS = ("direct", "mitmproxy", "seamwatch")
# `--daemon`: what Prometheus does, once a second.
SCRAPER = """
import sys, time, urllib.request
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read()
    except OSError:
        pass
    time.sleep(1)
"""
_RECV_SIZE = 1 << 18
_RECV_PAUSE_S = 0.001
PROCS = ("client", "origin", "proxy", "worker")


async def origin(port: int) -> None:
    """Streams SSE, one write per event: `/blast/N` as fast as the socket takes them,
    `/paced/N` one event a millisecond (well under every path's capacity, so the latency
    measured there is the path's own, not queueing)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                _, mode, n = head.split(b" ", 2)[1].decode().split("/")
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                for i in range(int(n)):
                    event = b"id: %d\ndata: %s\n\n" % (i, PAYLOAD % (i, i, time.monotonic_ns()))
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    if mode == "paced":
                        await asyncio.sleep(0.001)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


class Dechunker:
    """Undoes HTTP/1.1 chunked transfer coding (RFC 9112 §7.1) incrementally."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.done = False

    def feed(self, raw: bytes) -> list[bytes]:
        """The chunk payloads that `raw` completes."""
        buf = self.buf
        buf += raw
        out: list[bytes] = []
        pos = 0
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(bytes(buf[pos:eol]).split(b";", 1)[0], 16)
            if size == 0:
                self.done = True  # no trailers from these servers
                pos = len(buf)
                break
            end = eol + 2 + size
            if len(buf) < end + 2:
                break
            out.append(bytes(buf[eol + 2 : end]))
            pos = end + 2
        del buf[:pos]
        return out


def consume(port: int, target: str, events: int, *, latency: bool) -> tuple[float, float]:
    """(events/s, median latency in ms, or NaN) for one GET of a stream of `events` events."""
    latencies: list[int] = []
    count = 0
    last = b""
    tail = b""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (target.encode(), port))
        head = b""
        while b"\r\n\r\n" not in head:
            piece = sock.recv(65536)
            if not piece:
                raise RuntimeError("connection closed before the response head")
            head += piece
        head, _, rest = head.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
            raise RuntimeError(f"unexpected response head: {head!r}")
        dechunker = Dechunker()
        pieces = dechunker.feed(rest)
        while True:
            for data in pieces:
                if latency:
                    now = time.monotonic_ns()
                    *complete, tail = (tail + data).split(b"\n\n")
                    for event in complete:
                        sent = int(event[event.rindex(b'"t":') + 4 : event.rindex(b"}")])
                        latencies.append(now - sent)
                    count += len(complete)
                else:
                    # An event ends with its only blank line; it may straddle two chunks.
                    count += data.count(b"\n\n") + (last == b"\n" and data[:1] == b"\n")
                    last = data[-1:]
            if dechunker.done:
                break
            raw = sock.recv(_RECV_SIZE)
            if not raw:
                raise RuntimeError("connection closed mid-stream")
            pieces = dechunker.feed(raw)
            if not latency and len(raw) < _RECV_SIZE // 4:
                # Let events pile up in the socket rather than wake once per event: the client
                # then takes less CPU from the paths under test (all alike), and the kernel's
                # buffer keeps the sender from ever waiting on it at these rates.
                time.sleep(_RECV_PAUSE_S)
    elapsed = time.monotonic() - start
    if count != events:
        raise RuntimeError(f"received {count} events of {events}")
    return events / elapsed, statistics.median(latencies) / 1e6 if latencies else float("nan")


def cpu_ns(pid: int) -> int:
    """On-CPU time of a process, all its live threads, in ns (/proc/PID/task/*/schedstat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            continue
    return total


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def settle(
    pid: int, quiet_ns: int = 1_000_000, window_s: float = 0.05, limit_s: float = 10.0
) -> None:
    """Wait until a process has used less than `quiet_ns` of CPU over `window_s`."""
    deadline = time.monotonic() + limit_s
    before = cpu_ns(pid)
    while time.monotonic() < deadline:
        time.sleep(window_s)
        now = cpu_ns(pid)
        if now - before < quiet_ns:
            return
        before = now


def start(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_port(port, proc)
    return proc


def plain_args(*, upstream: str, port: int, script: Path) -> list[str]:
    """`seamwatch proxy`'s mitmdump options, with `script` loaded where the capture addon was.

    Like for like: the plain run shares every mitmproxy option of the seamwatch run
    (mode, connection strategy, flow_detail, log level); only the addon differs.
    """
    args = mitmdump_args(
        upstream=upstream, listen_host="127.0.0.1", listen_port=port, out=Path("unused")
    )
    plain = ["-s", str(script)]
    it = iter(args)
    for arg in it:
        value = next(it)
        if not (arg == "--set" and value.startswith("seamwatch_")):
            plain += [arg, value]
    return plain


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--paced-events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--daemon",
        action="store_true",
        help="run seamwatch as a long-running daemon would: stats line, metrics endpoint "
        "(scraped once a second), retention bound",
    )
    parser.add_argument("--origin", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.origin:
        asyncio.run(origin(args.origin))
        return

    origin_port = free_port()
    origin_proc = start([sys.executable, __file__, "--origin", str(origin_port)], origin_port)
    upstream = f"http://127.0.0.1:{origin_port}"
    work = Path(tempfile.mkdtemp(prefix="seamwatch-bench-"))
    plain_script = work / "plain_streaming.py"
    plain_script.write_text(PLAIN_STREAMING)
    mitmdump = [sys.executable, "-c", "from mitmproxy.tools.main import mitmdump; mitmdump()"]

    plain_port, sw_port = free_port(), free_port()
    daemon = Daemon()
    if args.daemon:
        daemon = Daemon(max_bytes=1 << 30, stats_interval_s=60, metrics=("127.0.0.1", free_port()))
    capture = work / "capture"
    plain = start(
        [*mitmdump, *plain_args(upstream=upstream, port=plain_port, script=plain_script)],
        plain_port,
    )
    seamwatch = start(
        [
            *mitmdump,
            "-s",
            str(CAPTURE_ADDON),
            *mitmdump_args(
                upstream=upstream,
                listen_host="127.0.0.1",
                listen_port=sw_port,
                out=capture,
                daemon=daemon,
            ),
        ],
        sw_port,
    )
    scraper = None
    if daemon.metrics is not None:
        scraper = subprocess.Popen(
            [sys.executable, "-c", SCRAPER, str(daemon.metrics[1])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ports = {"direct": origin_port, "mitmproxy": plain_port, "seamwatch": sw_port}
    rates: dict[str, list[float]] = {name: [] for name in PATHS}
    latencies: dict[str, list[float]] = {name: [] for name in PATHS}
    # CPU µs per event, per path and process, one value per round.
    cpu: dict[str, dict[str, list[float]]] = {name: {p: [] for p in PROCS} for name in PATHS}
    try:
        deadline = time.monotonic() + 20
        while not (workers := children(seamwatch.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)  # mitmdump listens before its scripts have loaded
        if len(workers) != 1:
            raise RuntimeError(f"expected one capture worker, found {workers}")
        pids = {
            "origin": {name: origin_proc.pid for name in PATHS},
            "proxy": {"mitmproxy": plain.pid, "seamwatch": seamwatch.pid},
            "worker": {"seamwatch": workers[0]},
        }
        for name in PATHS:
            consume(ports[name], "/blast/1000", 1000, latency=False)  # warm up
        settle(workers[0])
        for r in range(args.rounds):
            for name in PATHS[r % 3 :] + PATHS[: r % 3]:
                watched = {proc: by_path[name] for proc, by_path in pids.items() if name in by_path}
                before = {proc: cpu_ns(pid) for proc, pid in watched.items()}
                client_before = time.process_time_ns()
                rate, _ = consume(ports[name], f"/blast/{args.events}", args.events, latency=False)
                client = time.process_time_ns() - client_before
                if name == "seamwatch":
                    settle(workers[0])
                rates[name].append(rate)
                cpu[name]["client"].append(client / args.events / 1e3)
                for proc, pid in watched.items():
                    cpu[name][proc].append((cpu_ns(pid) - before[proc]) / args.events / 1e3)
                paced = consume(
                    ports[name], f"/paced/{args.paced_events}", args.paced_events, latency=True
                )
                latencies[name].append(paced[1])
    finally:
        if scraper is not None:
            scraper.terminate()
            scraper.wait(10)
        for proc in (plain, seamwatch, origin_proc):
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    captured = sum(p.stat().st_size for p in capture.iterdir())
    shutil.rmtree(work)

    print(
        f"rate: {args.events} events/stream as fast as possible; latency: {args.paced_events}"
        f" events at 1/ms; medians of {args.rounds} interleaved rounds; {os.cpu_count()} cores"
    )
    print(f"{'':<10} {'':>10} {'':>11}   CPU µs/event (median over rounds)")
    print(
        f"{'path':<10} {'events/s':>10} {'latency ms':>11}   "
        + " ".join(f"{p:>7}" for p in PROCS)
        + f" {'total':>7}"
    )
    for name in PATHS:
        per_proc = {p: statistics.median(v) for p, v in cpu[name].items() if v}
        print(
            f"{name:<10} {statistics.median(rates[name]):>10.0f}"
            f" {statistics.median(latencies[name]):>11.3f}   "
            + " ".join(f"{per_proc[p]:>7.1f}" if p in per_proc else f"{'-':>7}" for p in PROCS)
            + f" {sum(per_proc.values()):>7.1f}"
        )
    ratio = [s / m for s, m in zip(rates["seamwatch"], rates["mitmproxy"], strict=True)]
    direct = [d / s for d, s in zip(rates["direct"], rates["seamwatch"], strict=True)]
    print(f"seamwatch / mitmproxy event rate, per round: {spread(ratio)}")
    print(f"  rounds: {' '.join(f'{x:.2f}' for x in ratio)}")
    print(f"direct / seamwatch event rate, per round:    {spread(direct)}")
    # What the capture costs the machine, whatever the load did to the rates.
    cost = [
        (proxy + worker) / plain
        for proxy, worker, plain in zip(
            cpu["seamwatch"]["proxy"],
            cpu["seamwatch"]["worker"],
            cpu["mitmproxy"]["proxy"],
            strict=True,
        )
    ]
    print(f"CPU/event, seamwatch proxy+worker / mitmproxy proxy, per round: {spread(cost)}")
    print(f"capture written: {captured / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
