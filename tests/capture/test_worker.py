"""Tests for analyzer.capture.worker: the worker process fed frames directly, no CaptureClient."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.capture.pipe import CHUNK_TAIL, CLOCK, FLOW_LEN, PICKLED, write_frame
from tests.support.proxy import read_records

pytestmark = pytest.mark.timeout(60)

OPEN = {
    "schema": "1.0",
    "run_id": "worker-test",
    "tool_version": "test",
    "mitmproxy_version": "12.3.1",
    "listen": "127.0.0.1:8080",
    "upstream": "http://127.0.0.1:9000",
}
SSE = [("Content-Type", "text/event-stream")]


def pickled(item: tuple[object, ...]) -> bytes:
    data = pickle.dumps(item)
    return b"P" + PICKLED.pack(len(data)) + data


def chunk(flow: str, raw: bytes) -> bytes:
    encoded = flow.encode()
    return (
        b"C"
        + FLOW_LEN.pack(len(encoded))
        + encoded
        + CHUNK_TAIL.pack(time.monotonic_ns(), len(raw))
        + raw
    )


def frames() -> bytes:
    """A clock, a streamed SSE exchange of two chunks, as the client ships them."""
    at = (time.time_ns(), time.monotonic_ns())
    request = {
        "method": "GET",
        "scheme": "http",
        "authority": "127.0.0.1:9000",
        "path": "/mcp",
        "http_version": "HTTP/1.1",
        "headers": SSE,
        "client": "127.0.0.1:5000",
        "upstream": "127.0.0.1:9000",
        "body": b"",
    }
    response = {
        "status": 200,
        "http_version": "HTTP/1.1",
        "headers": SSE,
        "upstream": "127.0.0.1:9000",
        "body": None,
        "streamed": True,
    }
    return (
        b"T"
        + CLOCK.pack(*at)
        + pickled(("request", at, "f1", request))
        + pickled(("response", at, "f1", response))
        + chunk("f1", b"id: 1\ndata: a\n\nid: 2\nda")
        + chunk("f1", b"ta: b\n\n")
    )


def run_worker(out: Path, tail: bytes) -> tuple[int, list[dict[str, object]]]:
    """Start the worker, feed it `frames()` then `tail`, close its stdin; its status, records."""
    config = {
        "out_dir": str(out),
        "open_fields": OPEN,
        "redact": True,
        "replica_header": None,
        "rotate_bytes": 1 << 20,
        "flush_interval_s": 0.2,
        "retention": None,
        "stats_interval_s": None,
        "metrics": None,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyzer.capture.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        write_frame(proc.stdin, config)
        assert proc.stdout.readline() == b"ready\n"
        proc.stdin.write(frames() + tail)
        proc.stdin.close()
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, read_records(out)


@pytest.mark.parametrize(
    ("tail", "code", "last", "errors"),
    [
        pytest.param(b"X", 0, "capture_close", 0, id="goodbye: a clean close"),
        pytest.param(b"C\x02\x00f1\x00\x00", 0, "capture_stats", 0, id="torn frame: unclean"),
        pytest.param(b"Z", 1, "capture_stats", 1, id="unknown tag: out of step"),
    ],
)
def test_the_worker_records_the_frames_and_ends_as_the_pipe_says(
    tmp_path: Path, tail: bytes, code: int, last: str, errors: int
) -> None:
    status, records = run_worker(tmp_path / "cap", tail)
    assert status == code
    kinds = [r["kind"] for r in records]
    assert kinds[:3] == ["capture_open", "request", "response"]
    assert kinds.count("chunk") == 2
    assert kinds[-1] == last and "capture_close" not in kinds[:-1]
    assert records[-1]["addon_errors"] == errors
    assert [r["seq"] for r in records] == list(range(len(records)))
