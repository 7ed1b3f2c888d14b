"""Benchmark: SSE events/s and per-event latency, direct vs plain mitmproxy vs seamwatch proxy.

    .venv/bin/python bench/proxy_bench.py [--events N] [--rounds R]

All three paths run side by side in one process tree on 127.0.0.1, interleaved round by round
(the machine is shared and noisy), and the medians over rounds are printed with the ratios.
The origin writes one SSE event at a time, each carrying its send time (CLOCK_MONOTONIC, shared
by all processes on the host), so latency is measured end to end at the client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addons.proxy import mitmdump_args  # noqa: E402
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


def consume(url: str, events: int) -> tuple[float, float]:
    """(events/s, median latency in ms) for one GET of a stream of `events` events."""
    import httpx

    latencies: list[int] = []
    buf = b""
    start = time.monotonic()
    with httpx.Client(timeout=60) as client, client.stream("GET", url) as response:
        for piece in response.iter_raw():
            now = time.monotonic_ns()
            buf += piece
            *complete, buf = buf.split(b"\n\n")
            for event in complete:
                sent = int(event[event.rindex(b'"t":') + 4 : event.rindex(b"}")])
                latencies.append(now - sent)
    elapsed = time.monotonic() - start
    if len(latencies) != events:
        raise RuntimeError(f"received {len(latencies)} events of {events}")
    return events / elapsed, statistics.median(latencies) / 1e6


def start(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_port(port, proc)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--paced-events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
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
    plain = start(
        [
            *mitmdump,
            "--mode",
            f"reverse:{upstream}",
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            str(plain_port),
            "-s",
            str(plain_script),
            "--set",
            "flow_detail=0",
            "--set",
            "termlog_verbosity=warn",
        ],
        plain_port,
    )
    capture = work / "capture"
    seamwatch = start(
        [
            *mitmdump,
            *mitmdump_args(
                upstream=upstream, listen_host="127.0.0.1", listen_port=sw_port, out=capture
            ),
        ],
        sw_port,
    )
    paths = {
        "direct": upstream,
        "mitmproxy": f"http://127.0.0.1:{plain_port}",
        "seamwatch": f"http://127.0.0.1:{sw_port}",
    }
    rates: dict[str, list[float]] = {name: [] for name in paths}
    latencies: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for base in paths.values():
            consume(f"{base}/blast/1000", 1000)  # warm up
        for _ in range(args.rounds):
            for name, base in paths.items():
                rates[name].append(consume(f"{base}/blast/{args.events}", args.events)[0])
                paced = consume(f"{base}/paced/{args.paced_events}", args.paced_events)
                latencies[name].append(paced[1])
    finally:
        for proc in (plain, seamwatch, origin_proc):
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    captured = sum(p.stat().st_size for p in capture.iterdir())
    shutil.rmtree(work)

    print(
        f"rate: {args.events} events/stream as fast as possible; latency: {args.paced_events}"
        f" events at 1/ms; medians of {args.rounds} interleaved rounds; {os.cpu_count()} cores"
    )
    print(f"{'path':<10} {'events/s':>10} {'latency ms':>11}")
    med = {}
    for name in paths:
        med[name] = statistics.median(rates[name])
        lat = statistics.median(latencies[name])
        print(f"{name:<10} {med[name]:>10.0f} {lat:>11.3f}")
    print(f"seamwatch / mitmproxy event rate: {med['seamwatch'] / med['mitmproxy']:.2f}")
    print(f"direct / seamwatch event rate:    {med['direct'] / med['seamwatch']:.2f}")
    print(f"capture written: {captured / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
