import json
import logging
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from analyzer.capture.pipeline import CaptureClient
from analyzer.capture.recorder import Recorder
from analyzer.capture.redaction import Redactor
from analyzer.capture.writer import CaptureError
from analyzer.record_models import RECORD_ADAPTER
from tests.support.proxy import read_records

pytestmark = pytest.mark.timeout(60)

OPEN = {
    "schema": "1.0",
    "run_id": "pipeline-test",
    "tool_version": "test",
    "mitmproxy_version": "12.3.1",
    "listen": "127.0.0.1:8080",
    "upstream": "http://127.0.0.1:9000",
}
SSE = [("Content-Type", "text/event-stream"), ("Authorization", "Bearer s3cret")]


def stream(client: CaptureClient, flow: str = "f1") -> None:
    client.request(
        flow,
        method="GET",
        scheme="http",
        authority="127.0.0.1:9000",
        path="/mcp",
        http_version="HTTP/1.1",
        headers=SSE,
        client="127.0.0.1:5000",
        upstream="127.0.0.1:9000",
        body=b"",
    )
    client.response(
        flow,
        status=200,
        http_version="HTTP/1.1",
        headers=SSE,
        upstream="127.0.0.1:9000",
        body=None,
        streamed=True,
    )
    client.chunk(flow, b'id: 1\ndata: {"password":"hunter2"}\n\nid: 2\nda')
    client.chunk(flow, b"ta: x\n\n")


def test_records_reach_disk_in_order_redacted_and_closed(tmp_path: Path) -> None:
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN)
    stream(client)
    client.stream_end("f1", "client_closed", "Client disconnected.")
    client.server_unreachable("127.0.0.1:1", "connection refused")
    client.close()
    records = read_records(tmp_path / "cap")
    for r in records:
        RECORD_ADAPTER.validate_python(r)
    kinds = [r["kind"] for r in records]
    assert kinds == [
        "capture_open",
        "request",
        "response",
        "chunk",
        "chunk",
        "stream_end",
        "server_unreachable",
        "capture_stats",
        "capture_close",
    ]
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cap").iterdir())
    assert b"hunter2" not in blob and b"s3cret" not in blob
    chunks = [r for r in records if r["kind"] == "chunk"]
    assert [c["data"]["text"].split("\n")[0] for c in chunks] == ["id: 1", "id: 2"]
    # ts_ns is when the proxy saw the bytes, not when the worker wrote them.
    assert chunks[0]["ts_ns"] <= chunks[1]["ts_ns"] <= records[-1]["ts_ns"]
    assert records[-1]["redacted"] == 3
    assert records[0]["redaction"]["enabled"] is True


def test_open_streams_are_ended_and_an_unclean_stop_leaves_no_capture_close(
    tmp_path: Path,
) -> None:
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN)
    stream(client)
    client._ship()
    # The proxy dies: its end of the pipe closes without a goodbye.
    client._wake.set()
    client._sender.join(5)
    client._pipe.close()
    client._proc.wait(20)
    records = read_records(tmp_path / "cap")
    assert not [r for r in records if r["kind"] == "capture_close"]
    (end,) = [r for r in records if r["kind"] == "stream_end"]
    assert end["how"] == "open_at_shutdown"


def test_a_full_queue_drops_and_counts(tmp_path: Path) -> None:
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN, queue_max=0)
    stream(client)
    client.count_error()
    client.close()
    close = read_records(tmp_path / "cap")[-1]
    assert (close["kind"], close["seen"], close["dropped"], close["written"]) == (
        "capture_close",
        4,
        4,
        0,
    )
    assert close["addon_errors"] == 1


def test_an_unusable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CaptureError, match="cannot capture to"):
        CaptureClient(blocker / "cap", open_fields=OPEN)


def test_the_worker_ignores_signals_meant_for_the_proxy(tmp_path: Path) -> None:
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN)
    os.kill(client._proc.pid, signal.SIGTERM)
    os.kill(client._proc.pid, signal.SIGINT)
    time.sleep(0.2)
    stream(client)
    client.close()
    assert read_records(tmp_path / "cap")[-1]["kind"] == "capture_close"


class ListSink:
    """Records as a writer would store them, in memory."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def submit(self, record: dict[str, object]) -> None:
        self.records.append(record)

    def submit_encoded(self, members: list[bytes]) -> None:
        self.records += [json.loads(b"{" + m) for m in members]

    def count_redacted(self, n: int) -> None:
        pass


def test_the_worker_records_what_a_recorder_fed_directly_records(tmp_path: Path) -> None:
    """Thousands of chunks, several shipments and pipe reads: the same records, in order."""
    event = b'id: %d\ndata: {"method":"notifications/progress","params":{"progress":%d}}\n\n'
    raws = [event % (i, i) for i in range(5000)]
    raws[100:101] = [raws[100][:20], raws[100][20:]]  # an event split across two reads
    raws[2000] = b'data: {"password":"hunter2"}\n\n'
    raws[3000] = b"data: \xff\n\n"  # not UTF-8
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN)
    stream(client, "f2")
    before = time.time_ns()
    for i, raw in enumerate(raws):
        client.chunk("f2", raw)
        if i % 700 == 0:
            time.sleep(0.02)  # let the sender ship a part
    client.stream_end("f2", "complete")
    client.close()
    after = time.time_ns()
    records = read_records(tmp_path / "cap")
    for r in records:
        RECORD_ADAPTER.validate_python(r)

    sink = ListSink()
    tap = Recorder(sink, Redactor()).response(
        "f2",
        status=200,
        http_version="HTTP/1.1",
        headers=SSE,
        upstream=None,
        body=None,
        streamed=True,
    )
    assert tap is not None
    for raw in (b'id: 1\ndata: {"password":"hunter2"}\n\nid: 2\nda', b"ta: x\n\n", *raws):
        tap.feed(raw)

    def comparable(r: dict[str, Any]) -> str:
        r = {k: v for k, v in r.items() if k not in ("seq", "ts_ns", "mono_ns")}
        return re.sub(r"redacted:[0-9a-f]{8}", "redacted", json.dumps(r))

    chunks = [r for r in records if r["kind"] == "chunk"]
    assert len(chunks) == 5002
    assert [comparable(c) for c in chunks] == [comparable(r) for r in sink.records[1:]]
    assert "hunter2" not in json.dumps(records)
    assert all(before - 10**9 < c["ts_ns"] < after for c in chunks[2:])
    monos = [c["mono_ns"] for c in chunks]
    assert monos == sorted(monos)
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert records[-1]["kind"] == "capture_close" and records[-1]["redacted"] == 4


def test_a_frame_torn_by_a_dying_proxy_is_dropped_and_the_stop_is_unclean(tmp_path: Path) -> None:
    client = CaptureClient(tmp_path / "cap", open_fields=OPEN)
    stream(client)
    client._wake.set()
    client._sender.join(5)
    client._ship()
    # Half a chunk frame, then the pipe closes: the proxy died while writing it.
    client._pipe.write(b"C\x02\x00f1\x00\x00")
    client._pipe.close()
    client._proc.wait(20)
    records = read_records(tmp_path / "cap")
    assert [r["kind"] for r in records if r["kind"] == "chunk"] == ["chunk", "chunk"]
    assert records[-1]["kind"] == "capture_stats" and records[-1]["addon_errors"] == 0


def test_the_worker_imports_nothing_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `queue.py` (stdlib) or `analyzer/` (ours) where the proxy starts is never imported."""
    here = tmp_path / "here"
    (here / "analyzer").mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    planted = f"open({str(marker)!r}, 'a').write(__name__)\nraise ImportError('planted')\n"
    (here / "queue.py").write_text(planted)
    (here / "analyzer" / "__init__.py").write_text(planted)
    monkeypatch.chdir(here)
    client = CaptureClient(Path("cap"), open_fields=OPEN)
    stream(client)
    client.stream_end("f1", "complete")
    client.close()
    assert not marker.exists()
    kinds = [r["kind"] for r in read_records(here / "cap")]
    assert kinds[:4] == ["capture_open", "request", "response", "chunk"]
    assert kinds[-1] == "capture_close" and kinds.count("chunk") == 2


def test_a_dead_worker_is_reported_at_once_and_what_it_missed_at_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "cap"
    client = CaptureClient(out, open_fields=OPEN)
    stream(client)
    deadline = time.monotonic() + 10
    while len(read_records(out)) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)  # the worker wrote them
    client._proc.kill()
    # Noticed without any traffic, within a few send intervals.
    deadline = time.monotonic() + 10
    while not client.worker_died and time.monotonic() < deadline:
        time.sleep(0.01)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        f"capture worker died (killed by SIGKILL): recording to {out} stopped; traffic still passes"
    ]
    stream(client, "f2")  # the proxy goes on: 4 records nobody records
    client.stream_end("f2", "complete")
    client.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors[1:] == [
        f"capture in {out} is incomplete: 5 records after the worker died were not recorded"
    ]
    assert client.unrecorded == 5
    kinds = [r["kind"] for r in read_records(out)]
    assert kinds == ["capture_open", "request", "response", "chunk", "chunk"]
