"""Tests for analyzer.capture.writer: files, seq, rotation, counters, durability under SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import to_json

from analyzer.capture.retention import Retention
from analyzer.capture.writer import CaptureError, CaptureWriter
from analyzer.record_models import RECORD_ADAPTER, CaptureOpen
from analyzer.records import SCHEMA
from tests.support.disk import fill, small_disk

ROOT = Path(__file__).resolve().parents[2]

OPEN_FIELDS: dict[str, object] = {
    "schema": SCHEMA,
    "run_id": "t1",
    "tool_version": "0.1.0",
    "mitmproxy_version": "12.3.1",
    "redaction": {"enabled": True, "key_id": "abcd1234", "headers": [], "json_keys": []},
    "listen": "127.0.0.1:8080",
    "upstream": "http://127.0.0.1:9000",
    "replica_header": None,
    "client_header": None,
}


def stamp(kind: str, **fields: object) -> dict[str, object]:
    return {"kind": kind, "ts_ns": time.time_ns(), "mono_ns": time.monotonic_ns(), **fields}


def end(i: int) -> dict[str, object]:
    """A small valid record that carries its ordinal as the flow id."""
    return stamp("stream_end", flow=str(i), how="complete")


def read_file(path: Path, *, torn_ok: bool = False) -> list[dict[str, Any]]:
    """Every line validated against the schema; a torn last line is allowed when asked."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines[-1]:
        assert torn_ok, f"{path.name} ends without a newline"
    lines = lines[:-1]
    out = []
    for line in lines:
        RECORD_ADAPTER.validate_json(line)
        out.append(json.loads(line))
    return out


def read_capture(out_dir: Path, run_id: str = "t1") -> list[list[dict[str, Any]]]:
    files = sorted(out_dir.glob(f"capture-{run_id}-*.jsonl"))
    assert [f.name for f in files] == [f"capture-{run_id}-{i:04d}.jsonl" for i in range(len(files))]
    assert not list(out_dir.glob("*.partial"))
    return [read_file(f) for f in files]


def folder_size(folder: Path) -> int:
    """Bytes of the files in `folder` (a file renamed while it is listed counts 0)."""
    total = 0
    for path in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "captures"


@pytest.fixture
def open_writers() -> Iterator[list[CaptureWriter]]:
    """Writers a test forgot to close are closed, so no thread outlives its test."""
    writers: list[CaptureWriter] = []
    yield writers
    for w in writers:
        w.close()


def test_round_trip(out_dir: Path) -> None:
    records = [
        stamp(
            "request",
            flow="f1",
            method="POST",
            scheme="http",
            authority="127.0.0.1:9000",
            path="/mcp",
            http_version="HTTP/1.1",
            headers=[["content-type", "application/json"]],
            client="127.0.0.1:50000",
            upstream="127.0.0.1:9000",
            body={"text": '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'},
        ),
        stamp(
            "response",
            flow="f1",
            status=200,
            http_version="HTTP/1.1",
            headers=[["content-type", "text/event-stream"]],
            replica="127.0.0.1:9000",
            replica_source="upstream",
            streamed=True,
            body=None,
        ),
        stamp(
            "chunk",
            flow="f1",
            n=0,
            content_encoding=None,
            data={"text": 'id: 1\ndata: {"text":"héllo \\"😀\\" \\u2028"}\n\n'},
        ),
        stamp("stream_end", flow="f1", how="complete", error=None),
        stamp("server_unreachable", upstream="127.0.0.1:9001", error="refused"),
    ]
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS) as w:
        for r in records:
            w.submit(r)
    [lines] = read_capture(out_dir)
    opened = CaptureOpen.model_validate(lines[0])
    assert (opened.file_index, opened.run_id, opened.schema_) == (0, "t1", SCHEMA)
    assert {k: lines[0][k] for k in OPEN_FIELDS} == OPEN_FIELDS
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    assert [{k: v for k, v in line.items() if k != "seq"} for line in lines[1:6]] == records
    assert [line["kind"] for line in lines[6:]] == ["capture_stats", "capture_close"]
    final = {"seen": 5, "written": 5, "dropped": 0, "redacted": 0, "addon_errors": 0}
    assert {k: lines[-1][k] for k in final} == final == w.counters
    raw = (out_dir / "capture-t1-0000.jsonl").read_bytes()
    assert "héllo".encode() in raw and "😀".encode() in raw  # UTF-8, not \u escapes
    assert raw.startswith(b'{"seq":0,"kind":"capture_open",')


def test_partial_while_open_then_renamed(out_dir: Path, open_writers: list[CaptureWriter]) -> None:
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS, flush_interval_s=0.01)
    open_writers.append(w)
    w.start()
    w.submit(end(0))
    partial = out_dir / "capture-t1-0000.jsonl.partial"
    wait_for(lambda: len(read_file(partial)) == 2)
    assert not (out_dir / "capture-t1-0000.jsonl").exists()
    w.close()
    assert not partial.exists()
    assert [r["kind"] for r in read_capture(out_dir)[0]][-2:] == ["capture_stats", "capture_close"]


def test_rotation_keeps_seq_and_opens_every_file(out_dir: Path) -> None:
    rotate = 2048
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS, rotate_bytes=rotate) as w:
        for i in range(300):
            w.submit(end(i))
    files = read_capture(out_dir)
    assert len(files) > 5
    for index, lines in enumerate(files):
        assert lines[0]["kind"] == "capture_open" and lines[0]["file_index"] == index
        assert sum(k == "capture_open" for k in (r["kind"] for r in lines)) == 1
        size = (out_dir / f"capture-t1-{index:04d}.jsonl").stat().st_size
        assert size <= rotate
    everything = [r for lines in files for r in lines]
    assert [r["seq"] for r in everything] == list(range(len(everything)))
    flows = [r["flow"] for r in everything if r["kind"] == "stream_end"]
    assert flows == [str(i) for i in range(300)]
    assert [r["kind"] for r in everything].count("capture_close") == 1
    assert everything[-1]["kind"] == "capture_close"


@pytest.mark.parametrize("inline", [False, True])
def test_rotate_closes_the_file_between_two_records(out_dir: Path, inline: bool) -> None:
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS)
    w.start(inline=inline)
    w.submit(end(0))
    w.rotate()
    w.submit(end(1))
    w.close()
    files = read_capture(out_dir)
    assert [[r["kind"] for r in lines if r["kind"] != "capture_stats"] for lines in files] == [
        ["capture_open", "stream_end"],
        ["capture_open", "stream_end", "capture_close"],
    ]
    assert files[1][0]["file_index"] == 1 and w.files == 2


def test_retention_deletes_old_files_and_the_next_capture_open_says_which(
    out_dir: Path,
) -> None:
    bound = 8192
    with CaptureWriter(
        out_dir,
        open_fields=OPEN_FIELDS,
        rotate_bytes=2048,
        retention=Retention(max_bytes=bound),
    ) as w:
        for i in range(300):
            w.submit(end(i))
            assert folder_size(out_dir) <= bound
    files = sorted(out_dir.glob("capture-t1-*.jsonl"))
    assert w.files_deleted == w.files - len(files) > 0
    opens = [read_file(f)[0] for f in files]
    assert opens[0]["file_index"] == w.files_deleted  # the oldest went, in order
    deleted = [d for o in opens for d in o["retention"]["deleted"]]
    assert [d["file_index"] for d in deleted][-2:] == [
        opens[0]["file_index"] - 2,
        opens[0]["file_index"] - 1,
    ]
    assert opens[-1]["retention"]["cut"] == {"t1": opens[0]["seq"] - 1}
    assert opens[-1]["retention"]["max_bytes"] == bound
    everything = [r for f in files for r in read_file(f)]
    assert [r["seq"] for r in everything] == list(range(opens[0]["seq"], everything[-1]["seq"] + 1))


@pytest.mark.parametrize("inline", [False, True])
def test_a_file_past_max_age_rotates_the_current_one_to_record_its_deletion(
    out_dir: Path, inline: bool
) -> None:
    out_dir.mkdir()
    old = out_dir / "capture-old-0000.jsonl"
    old.write_text('{"seq":0,"kind":"capture_open","run_id":"old","file_index":0}\n{"seq":1}\n')
    w = CaptureWriter(
        out_dir,
        open_fields=OPEN_FIELDS,
        stats_interval_s=0.05,
        retention=Retention(max_age_s=3600),
    )
    w.start(inline=inline)
    w.submit(end(0))
    stamp_s = time.time() - 7200  # aged out while the writer runs
    os.utime(old, (stamp_s, stamp_s))
    deadline = time.monotonic() + 5
    while old.exists() and time.monotonic() < deadline:
        if inline:
            w.pump()
        time.sleep(0.01)
    w.submit(end(1))
    w.close()
    assert not old.exists()
    first, second = read_capture(out_dir)
    assert first[0]["retention"]["deleted"] == []
    (deleted,) = second[0]["retention"]["deleted"]
    assert deleted == {
        "file": "capture-old-0000.jsonl",
        "run_id": "old",
        "file_index": 0,
        "first_seq": 0,
        "last_seq": 1,
        "bytes": deleted["bytes"],
        "reason": "max_age",
    }
    assert second[0]["retention"]["cut"] == {"old": 1}
    assert [r["flow"] for f in (first, second) for r in f if r["kind"] == "stream_end"] == [
        "0",
        "1",
    ]


def test_a_record_larger_than_the_rotation_size_gets_a_file(out_dir: Path) -> None:
    big = stamp("stream_end", flow="big", how="error", error="x" * 5000)
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS, rotate_bytes=1000) as w:
        w.submit(end(0))
        w.submit(big)
        w.submit(end(1))
    files = read_capture(out_dir)
    flows = [[r.get("flow") for r in lines if r["kind"] == "stream_end"] for lines in files]
    assert flows[:3] == [["0"], ["big"], ["1"]]


def test_permissions_do_not_follow_the_umask(out_dir: Path) -> None:
    old = os.umask(0)
    try:
        with CaptureWriter(out_dir, open_fields=OPEN_FIELDS, rotate_bytes=600) as w:
            for i in range(10):
                w.submit(end(i))
    finally:
        os.umask(old)
    assert stat.S_IMODE(out_dir.stat().st_mode) == 0o700
    files = list(out_dir.iterdir())
    assert len(files) > 1
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


def test_missing_parents_are_made_private_whatever_the_umask(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir(mode=0o755)
    os.chmod(tmp_path / "shared", 0o755)
    out = tmp_path / "shared" / "a" / "b" / "cap"
    old = os.umask(0)
    try:
        with CaptureWriter(out, open_fields=OPEN_FIELDS):
            pass
    finally:
        os.umask(old)
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in (out.parents[2], *out.parents[:2], out)
    }
    assert modes == {"shared": 0o755, "a": 0o700, "b": 0o700, "cap": 0o700}


def test_an_existing_folder_keeps_its_mode(out_dir: Path) -> None:
    out_dir.mkdir(mode=0o750)
    os.chmod(out_dir, 0o750)
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS):
        pass
    assert stat.S_IMODE(out_dir.stat().st_mode) == 0o750
    assert stat.S_IMODE((out_dir / "capture-t1-0000.jsonl").stat().st_mode) == 0o600


def test_queue_overflow_is_counted_exactly(out_dir: Path) -> None:
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS, queue_max=10)
    for i in range(25):  # not started yet: nothing drains the queue
        w.submit(end(i))
    assert w.counters == {"seen": 25, "written": 0, "dropped": 15, "redacted": 0, "addon_errors": 0}
    w.start()
    w.close()
    [lines] = read_capture(out_dir)
    assert [r["flow"] for r in lines if r["kind"] == "stream_end"] == [str(i) for i in range(10)]
    assert [r["seq"] for r in lines] == list(range(len(lines)))  # drops leave no seq gap
    close = lines[-1]
    assert (close["seen"], close["written"], close["dropped"]) == (25, 10, 15)


def test_after_close_submissions_are_dropped(out_dir: Path) -> None:
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS)
    w.start()
    w.submit(end(0))
    w.close()
    w.submit(end(1))
    w.close()  # idempotent
    assert w.counters["dropped"] == 1 and w.counters["written"] == 1
    [lines] = read_capture(out_dir)
    assert lines[-1]["kind"] == "capture_close" and lines[-1]["seen"] == 1


def test_counters_from_the_addon(out_dir: Path) -> None:
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS) as w:
        w.count_redacted(3)
        w.count_redacted(2)
        w.count_error()
    close = read_capture(out_dir)[0][-1]
    assert (close["redacted"], close["addon_errors"]) == (5, 1)


def test_periodic_stats(out_dir: Path) -> None:
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS, stats_interval_s=0.05) as w:
        w.submit(end(0))
        time.sleep(0.3)
    kinds = [r["kind"] for r in read_capture(out_dir)[0]]
    assert kinds.count("capture_stats") >= 3  # at least two periodic ones and the final one
    assert kinds[-2:] == ["capture_stats", "capture_close"]


def test_a_bad_record_is_counted_and_skipped(out_dir: Path) -> None:
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS) as w:
        w.submit(end(0))
        w.submit(stamp("stream_end", flow=object(), how="complete"))  # not JSON
        w.submit([1, 2])  # type: ignore[arg-type]
        w.submit({})
        w.submit(end(1))
    [lines] = read_capture(out_dir)
    assert [r["flow"] for r in lines if r["kind"] == "stream_end"] == ["0", "1"]
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    assert (lines[-1]["seen"], lines[-1]["written"], lines[-1]["addon_errors"]) == (5, 2, 3)


def test_surrogates_are_repaired_and_counted(out_dir: Path) -> None:
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS) as w:
        w.submit(stamp("stream_end", flow="pair", how="error", error="a\ud83d\ude00b"))
        w.submit(stamp("stream_end", flow="lone", how="error", error="a\udcffb\ud800"))
    [lines] = read_capture(out_dir)
    errors = {r["flow"]: r["error"] for r in lines if r["kind"] == "stream_end"}
    assert errors == {"pair": "a😀b", "lone": "a\ufffdb\ufffd"}
    assert (lines[-1]["written"], lines[-1]["addon_errors"]) == (2, 2)


def _fd_of(path: Path) -> int:
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                return int(name)
        except OSError:
            continue
    raise AssertionError(f"{path} is not open")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_holds_records_until_it_has_room_again(out_dir: Path) -> None:
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS, flush_interval_s=0.01)
    with w:
        w.submit(end(0))
        wait_for(lambda: w.counters["written"] == 1)
        fd = _fd_of(out_dir / "capture-t1-0000.jsonl.partial")
        saved = os.dup(fd)
        full = os.open("/dev/full", os.O_WRONLY)
        try:
            os.dup2(full, fd)  # every write now fails with ENOSPC
            w.submit(end(1))
            wait_for(lambda: w.counters["addon_errors"] >= 1)
            assert w.counters["written"] == 1
        finally:
            os.dup2(saved, fd)  # the disk has room again
            os.close(saved)
            os.close(full)
        w.submit(end(2))
        wait_for(lambda: w.counters["written"] == 3)  # the held record too, in order
    [lines] = read_capture(out_dir)
    flows = [r["flow"] for r in lines if r["kind"] == "stream_end"]
    assert flows == ["0", "1", "2"]
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    close = lines[-1]
    assert (close["seen"], close["written"], close["dropped"]) == (3, 3, 0)
    assert close["addon_errors"] >= 1 and w.lost == 0


def test_setup_errors(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(CaptureError):
        CaptureWriter(tmp_path / "file", open_fields=OPEN_FIELDS).start()
    with pytest.raises(ValueError, match="run_id"):
        CaptureWriter(tmp_path, open_fields=OPEN_FIELDS | {"run_id": "../x"})
    with pytest.raises(ValueError, match="must not set"):
        CaptureWriter(tmp_path, open_fields=OPEN_FIELDS | {"seq": 3})
    with pytest.raises(ValueError, match="capture_open"):
        CaptureWriter(tmp_path, open_fields={k: v for k, v in OPEN_FIELDS.items() if k != "schema"})
    w = CaptureWriter(tmp_path / "ok", open_fields=OPEN_FIELDS)
    with w, pytest.raises(CaptureError):
        w.start()
    with pytest.raises(CaptureError):  # the same run id twice
        CaptureWriter(tmp_path / "ok", open_fields=OPEN_FIELDS).start()


def test_many_records_from_a_running_writer(out_dir: Path) -> None:
    n = 20000
    with CaptureWriter(out_dir, open_fields=OPEN_FIELDS, queue_max=n) as w:
        for i in range(n):
            w.submit(end(i))
    lines = read_capture(out_dir)[0]
    assert len(lines) == n + 3
    assert [r["seq"] for r in lines] == list(range(n + 3))
    assert lines[-1]["written"] == n


CHILD = """
import json, sys, time
from pathlib import Path
from analyzer.capture.writer import CaptureWriter

out, flush, fields = Path(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
w = CaptureWriter(out, open_fields=fields, flush_interval_s=flush)
w.start()
i = 0
while True:
    for _ in range(50):
        w.submit({"kind": "stream_end", "ts_ns": time.time_ns(),
                  "mono_ns": time.monotonic_ns(), "flow": str(i), "how": "complete"})
        i += 1
    # every record up to i - 1 was submitted before this instant
    print(i - 1, time.monotonic_ns(), flush=True)
    time.sleep(0.002)
"""


def test_sigkill_leaves_every_record_older_than_two_flush_intervals(tmp_path: Path) -> None:
    flush = 0.1
    out_dir = tmp_path / "captures"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    args = [sys.executable, str(script), str(out_dir), str(flush), json.dumps(OPEN_FIELDS)]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert child.stdout is not None
        assert child.stdout.readline()  # submitting
        time.sleep(0.6)
        killed_at = time.monotonic_ns()
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=10)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGKILL
    deadline = killed_at - int(2 * flush * 1e9)
    submitted = [line.split() for line in rest.splitlines() if len(line.split()) == 2]
    due = max(int(i) for i, at in submitted if int(at) < deadline)
    assert due > 1000

    partial = out_dir / "capture-t1-0000.jsonl.partial"
    lines = read_file(partial, torn_ok=True)
    assert lines[0]["kind"] == "capture_open"
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    flows = [int(r["flow"]) for r in lines if r["kind"] == "stream_end"]
    assert flows == list(range(len(flows)))
    assert len(flows) > due, f"record {due} was submitted 2 flush intervals before the kill"


def test_encoded_records_get_seq_rotation_and_counters(out_dir: Path) -> None:
    members = [to_json(end(i))[1:] for i in range(60)]
    w = CaptureWriter(out_dir, open_fields=OPEN_FIELDS, rotate_bytes=2000)
    with w:
        w.submit(end(-1))
        w.submit_encoded(members[:30])
        w.submit_encoded(members[30:])
        w.submit(end(60))
    w.submit_encoded(members[:3])  # after close: dropped
    files = read_capture(out_dir)
    assert len(files) > 2  # rotation fell inside the encoded batches
    assert all(f[0]["kind"] == "capture_open" for f in files)
    lines = [r for f in files for r in f]
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    flows = [r["flow"] for r in lines if r["kind"] == "stream_end"]
    assert flows == [str(i) for i in range(-1, 61)]
    assert (lines[-1]["seen"], lines[-1]["written"], lines[-1]["dropped"]) == (62, 62, 0)
    assert w.counters["dropped"] == 3 and w.counters["seen"] == 65


def test_inline_writes_on_pump_syncs_when_due_and_closes(
    out_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`start(inline=True)`: no thread; the caller's `pump` writes, syncs and writes stats."""
    synced: list[int] = []
    fdatasync = os.fdatasync

    def counting_fdatasync(fd: int) -> None:
        synced.append(fd)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", counting_fdatasync)
    w = CaptureWriter(
        out_dir,
        open_fields=OPEN_FIELDS,
        rotate_bytes=3000,
        flush_interval_s=0.05,
        stats_interval_s=0.2,
    )
    w.start(inline=True)
    partial = out_dir / "capture-t1-0000.jsonl.partial"
    w.submit(end(0))
    w.submit_encoded([to_json(end(i))[1:] for i in (1, 2)])
    assert [r["kind"] for r in read_file(partial)] == ["capture_open"]  # pending until the pump
    due = w.pump()
    assert [r.get("flow") for r in read_file(partial)] == [None, "0", "1", "2"]
    assert 0 < due <= 0.05  # the sync is due within the flush interval
    assert not synced
    time.sleep(due)
    w.pump()
    assert synced  # written data is synced on the writer's cadence, with no thread to do it
    time.sleep(0.2)
    w.pump()
    assert [r["kind"] for r in read_file(partial)][-1] == "capture_stats"
    for i in range(3, 40):  # past the rotation size, inline too
        w.submit(end(i))
    w.pump()
    w.close()
    w.submit(end(40))  # after close: dropped
    files = read_capture(out_dir)
    assert len(files) > 1 and all(f[0]["kind"] == "capture_open" for f in files)
    lines = [r for f in files for r in f]
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    assert [r["flow"] for r in lines if r["kind"] == "stream_end"] == [str(i) for i in range(40)]
    assert (lines[-1]["kind"], lines[-1]["seen"], lines[-1]["written"]) == ("capture_close", 40, 40)
    assert w.counters["dropped"] == 1


def _big(i: int, size: int = 4000) -> dict[str, object]:
    """A record of about `size` bytes that carries its ordinal as the flow id."""
    return stamp("stream_end", flow=str(i), how="error", error="x" * size)


def test_a_disk_that_fills_then_frees_space_loses_only_what_outgrew_the_hold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fault injection on a real filesystem: a 256 KiB tmpfs that fills up, then frees space,
    twice; the second time more than the writer may hold (64 KiB) piles up meanwhile."""
    caplog.set_level("WARNING", logger="analyzer.capture")
    with small_disk(tmp_path / "disk", "256k") as disk:
        out = disk / "cap"
        w = CaptureWriter(out, open_fields=OPEN_FIELDS, hold_bytes=64 * 1024)
        w.start(inline=True)
        filler = fill(disk)
        # 1. Full: 10 records of 4 KB are held, not lost, and the failure is said at once.
        for i in range(10):
            w.submit(_big(i))
        w.pump()
        assert w.counters | {"redacted": 0} == {
            "seen": 10, "written": 0, "dropped": 0, "redacted": 0, "addon_errors": 1
        }  # fmt: skip
        assert [r.getMessage() for r in caplog.records] == [
            f"cannot write the capture file {out}/capture-t1-0000.jsonl.partial: No space left "
            "on device; holding records in memory, retrying"
        ]
        caplog.clear()
        # Space returns: the held records are written, and the recovery is said.
        filler.unlink()
        w.pump()
        assert (w.counters["written"], w.counters["dropped"], w.lost) == (10, 0, 0)
        (recovered,) = caplog.records
        assert recovered.levelname == "WARNING"
        assert recovered.getMessage().startswith(f"capture writing to {out}/capture-t1-0000")
        assert recovered.getMessage().endswith(": 10 held record(s) written")
        caplog.clear()
        # 2. Full again, and 20 records (80 KB) pile up: past the hold, given up and counted.
        filler = fill(disk)
        for i in range(10, 30):
            w.submit(_big(i))
        w.pump()
        assert w.lost == 20 and w.counters["dropped"] == 20
        assert [r.levelname for r in caplog.records] == ["ERROR", "ERROR"]
        assert caplog.records[1].getMessage() == (
            f"capture lost 20 record(s) that could not be written to {out}/capture-t1-0000"
            ".jsonl.partial (No space left on device; more than 65536 bytes held)"
        )
        w.submit(_big(30))  # still full: held
        w.pump()
        filler.unlink()
        w.close()
        [lines] = read_capture(out)
    records = [line for line in lines if line["kind"] == "stream_end"]
    # What reached disk: records 0-9 and 30; 10-29 are counted in dropped, their seq numbers
    # taken back (no gap: the reader counts the loss once, from dropped).
    assert [r["flow"] for r in records] == [str(i) for i in (*range(10), 30)]
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    final = lines[-1]
    assert final["kind"] == "capture_close"
    assert {k: final[k] for k in ("seen", "written", "dropped")} == {
        "seen": 31, "written": 11, "dropped": 20
    }  # fmt: skip


def test_records_still_held_at_close_are_counted_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="analyzer.capture")
    with small_disk(tmp_path / "disk", "256k") as disk:
        out = disk / "cap"
        w = CaptureWriter(out, open_fields=OPEN_FIELDS)
        w.start(inline=True)
        fill(disk)
        for i in range(5):
            w.submit(_big(i))
        w.pump()
        w.close()  # the disk never frees: given up at close
        assert w.lost == 5 and w.counters["dropped"] == 5
        [lines] = read_capture(out)
    # The last counters still fit in the room the failed batch left: the loss is on disk.
    assert [line["kind"] for line in lines] == ["capture_open", "capture_stats", "capture_close"]
    assert (lines[-1]["seen"], lines[-1]["written"], lines[-1]["dropped"]) == (5, 0, 5)
    lost = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][-1]
    assert lost.endswith("(No space left on device; the capture was closed)")
