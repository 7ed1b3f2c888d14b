"""analyzer.ingest.tail: a growing capture read incrementally equals a full read, poll by poll.

The contract: after every poll, every timeline frame (and the input report's counts) equals what
`read_timeline` builds from the same files. The captures grow here the way a proxy grows them:
lines appended, a line torn mid-write then completed, a `.partial` file renamed on rotation and
a new (first empty) one started.
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import LiveTimeline, read_timeline
from analyzer.ingest.common import UnreadableInput
from analyzer.ingest.tail import CaptureTail
from analyzer.normalize import Normalizer
from analyzer.timeline import Timeline
from tests.support.origin import Origin, Script
from tests.support.proxy import run_proxy
from tests.support.records import Capture, event, req, res, sse

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "dashboard"
    / "round-robin-replicas"
    / "capture"
)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in one order whatever order the reader wrote them in (nested columns aside)."""
    keys = [name for name, dtype in frame.schema.items() if not dtype.is_nested()]
    return frame.sort(keys, nulls_last=True, maintain_order=True)


def timeline_of(tail: CaptureTail) -> Timeline:
    """The timeline of what the tail read so far, as the Live page builds it."""
    return LiveTimeline(tail).timeline()


def assert_same_as_full_read(tail: CaptureTail, path: Path) -> Timeline:
    """The timeline of the tail's tables and its report equal a full read's, frame by frame."""
    mine = timeline_of(tail)
    full = read_timeline([path], cache=False)
    for name, frame in full.frames().items():
        expected = frame.collect()
        got = mine.frames()[name].collect()
        try:
            assert_frame_equal(_sorted(got), _sorted(expected))
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    (report,) = mine.inputs
    (expected_report,) = full.inputs
    assert (report.records, report.skipped, dict(report.counts)) == (
        expected_report.records,
        expected_report.skipped,
        dict(expected_report.counts),
    )
    assert sorted(report.files) == sorted(expected_report.files)
    return mine


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _session() -> Capture:
    """Initialize, then a tools/call answered on an event stream, then a GET stream."""
    c = Capture(run_id="run-t").open()
    f = c.request(body=req("initialize", 1, protocolVersion="2025-11-25"))
    c.response(f, body=res(1, protocolVersion="2025-11-25"), headers={"mcp-session-id": "S"})
    g = c.request(
        body=req("tools/call", 2, name="t", arguments={}), headers={"mcp-session-id": "S"}
    )
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="1", data="")), n=0)
    c.chunk(g, sse(event(req("notifications/progress", progress=1), id="2")), n=1)
    c.chunk(g, 'id: 3\ndata: {"jsonrpc":"2.0",', n=2)  # an event completed by the next chunk
    c.chunk(g, '"id":2,"result":{"content":[]}}\n\n', n=3)
    c.end(g)
    h = c.request("GET", headers={"mcp-session-id": "S"})
    c.response(h, sse=True)
    for k in range(4):
        c.chunk(h, sse(event(req("notifications/message", level="info", n=k), id=f"g{k}")), n=k)
    c.end(h, "client_closed")
    c.close()
    return c


def _events(timeline: Timeline) -> list[str | None]:
    return timeline.sse_events.sort("seq", "ordinal").collect()["event_id"].to_list()


def test_appended_lines_are_read_and_equal_a_full_read(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    tail = CaptureTail(tmp_path)
    seen = []
    for cut in (1, 3, 6, 8, 9, 12, 15, len(lines)):
        partial.write_bytes(_join(lines[:cut]))
        result = tail.poll()
        assert result.changed and not result.restarted
        seen.append(_events(assert_same_as_full_read(tail, tmp_path)))
    # Events show while their stream is still open: the rows come from `snapshot()`.
    assert seen[3] == ["1", "2"]
    assert seen[4] == ["1", "2", "3"]
    assert seen[-1] == ["1", "2", "3", "g0", "g1", "g2", "g3"]


def test_open_flows_show_so_far_and_the_torn_event_tail(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(lines[:8]))  # the result event is half there (n=2)
    tail = CaptureTail(tmp_path)
    tail.poll()
    timeline = assert_same_as_full_read(tail, tmp_path)
    flows = timeline.exchanges.sort("seq").collect()
    assert flows["end_how"].to_list() == [None, None]
    assert flows["events"].to_list() == [0, 2]
    assert tail.report().counts == {"missing_close": 1}


def test_a_torn_line_waits_for_its_end(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    data = _join(lines[:7])
    torn = lines[7][:30]
    partial.write_bytes(data + torn)
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().counts == {"torn_line": 1, "missing_close": 1}
    records = tail.report().records

    # Still torn, a few bytes more: read again (only the torn line), nothing taken.
    partial.write_bytes(data + lines[7][:60])
    assert tail.poll().records == 0
    assert_same_as_full_read(tail, tmp_path)

    # The rest of the line and two more: taken once, as if never torn.
    partial.write_bytes(_join(lines[:10]))
    assert tail.poll().records == 3
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().records == records + 3
    assert tail.report().counts == {"missing_close": 1}


def test_a_complete_last_line_without_its_line_end_is_taken_once(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(lines[:5]) + lines[5])  # a full record, its "\n" not yet written
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().records == 6
    partial.write_bytes(_join(lines[:9]))
    assert tail.poll().records == 3
    assert_same_as_full_read(tail, tmp_path)
    partial.write_bytes(_join(lines[:9]) + lines[9])
    assert tail.poll().records == 1
    assert_same_as_full_read(tail, tmp_path)
    # What followed was not the line end: the line was not the record it seemed; start over.
    partial.write_bytes(_join(lines[:9]) + lines[9] + b"#\n")
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().counts["corrupt_line"] == 1


def test_rotation_keeps_the_offset_and_follows_into_the_next_file(tmp_path: Path) -> None:
    """A stream cut by rotation continues in the next file; the renamed file is not re-read."""
    c = Capture(run_id="run-r").open(file_index=0)
    f = c.request("GET", headers={"mcp-session-id": "S"})
    c.response(f, sse=True)
    c.chunk(f, 'id: a\ndata: {"x":', n=0)  # incomplete: completed in the next file
    first = c.lines()
    c.records.clear()
    c.open(file_index=1)
    c.chunk(f, "1}\n\nid: b\ndata: 2\n\n", n=1)
    g = c.request(body=req("ping", 7))
    c.response(g, body=res(7))
    c.end(g)
    c.end(f)
    c.close()
    second = c.lines()
    old = tmp_path / "capture-run-r-0000.jsonl.partial"
    old.write_bytes(_join(first))
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)

    # The writer renames the file and creates the next one, empty until its capture_open.
    old.rename(tmp_path / "capture-run-r-0000.jsonl")
    new = tmp_path / "capture-run-r-0001.jsonl.partial"
    new.touch()
    result = tail.poll()
    assert result.changed and result.bytes_read == 0 and not result.restarted
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().counts == {"missing_close": 2}  # the empty file is a run of its own

    new.write_bytes(second[0][:20])  # capture_open half written
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)

    for cut in (1, 2, 4, len(second)):
        new.write_bytes(_join(second[:cut]))
        result = tail.poll()
        assert not result.restarted
        assert result.bytes_read <= len(_join(second[:cut]))  # the renamed file is not re-read
        timeline = assert_same_as_full_read(tail, tmp_path)
    assert _events(timeline) == ["a", "b"]
    assert tail.report().counts == {}
    new.rename(tmp_path / "capture-run-r-0001.jsonl")
    assert tail.poll().bytes_read == 0
    assert [name for name, _, _ in tail.files] == [
        "capture-run-r-0000.jsonl",
        "capture-run-r-0001.jsonl",
    ]
    assert_same_as_full_read(tail, tmp_path)


def test_a_poll_without_new_bytes_parses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(lines[:9]) + lines[9][:10])  # a torn tail too: not re-read
    tail = CaptureTail(tmp_path)
    tail.poll()
    version = tail.version
    live = LiveTimeline(tail)
    timeline = live.timeline()

    def no_read(*_: Any, **__: Any) -> Any:
        raise AssertionError("read without new bytes")

    monkeypatch.setattr(CaptureTail, "_read_file", no_read)
    monkeypatch.setattr("analyzer.ingest.tail.parse_line", no_read)
    monkeypatch.setattr("analyzer.ingest.tracking.parse_line", no_read)
    monkeypatch.setattr("analyzer.ingest.lines.plan", no_read)
    result = tail.poll()
    assert (result.changed, result.bytes_read, result.records) == (False, 0, 0)
    assert tail.version == version
    assert live.timeline() is timeline  # not rebuilt either


def test_damage_is_counted_as_a_full_read_counts_it(tmp_path: Path) -> None:
    lines = _session().lines()
    damaged = [
        b"\xef\xbb\xbf" + lines[0],  # a byte order mark
        *lines[1:4],
        lines[4][:40] + b"#garbage",  # a corrupt line
        lines[5],
        lines[5],  # a duplicate
        b"",  # a blank line
        *lines[10:13],  # seq 6 to 9 lost
        b'{"kind":"mystery","seq":13,"ts_ns":1}',
        b"\xff\xfe",
        *lines[15:],
    ]
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    tail = CaptureTail(tmp_path)
    for cut in (3, 5, 8, 11, len(damaged)):
        partial.write_bytes(_join(damaged[:cut]))
        tail.poll()
        assert_same_as_full_read(tail, tmp_path)
    assert set(tail.report().counts) >= {
        "bom",
        "corrupt_line",
        "blank_line",
        "seq_gap",
        "unknown_kind",
        "invalid_utf8",
    }


def test_records_the_proxys_retention_deleted_are_a_note_as_in_a_full_read(
    tmp_path: Path,
) -> None:
    """A run whose file 0 retention deleted: file 1's capture_open says what was cut."""
    records = _session().records
    reopened = {**records[0], "seq": 4, "file_index": 1}
    reopened["retention"] = {"max_bytes": 1, "max_age_s": None, "deleted": [], "cut": {"run-t": 3}}
    kept = [{**r, "seq": r["seq"] + 1} for r in records[4:]]
    lines = [json.dumps(r).encode() for r in [reopened, *kept]]
    (tmp_path / f"capture-{reopened['run_id']}-0001.jsonl").write_bytes(_join(lines))
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)
    assert dict(tail.report().counts) == {"retention_deleted": 4}


def test_a_rewritten_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(lines))
    tail = CaptureTail(tmp_path)
    tail.poll()
    partial.write_bytes(_join(lines[:6]))  # shorter: not an append
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)
    partial.unlink()
    (tmp_path / "other.jsonl").write_bytes(_join(lines[:4]))
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)


def test_a_new_run_sorting_before_what_was_read_starts_over(tmp_path: Path) -> None:
    late = Capture(run_id="run-late")
    late._ms = 5_000
    late.open()
    late.request(body=req("ping", 1))
    (tmp_path / "b.jsonl").write_bytes(_join(late.lines()))
    tail = CaptureTail(tmp_path)
    tail.poll()
    early = Capture(run_id="run-early").open()
    early.request(body=req("ping", 1))
    (tmp_path / "a.jsonl").write_bytes(_join(early.lines()))
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)


def test_the_lab_capture_grown_in_uneven_steps(tmp_path: Path) -> None:
    """A real capture (the stored lab run) appended a few KiB at a time, cut anywhere."""
    (source,) = FIXTURE.glob("*.jsonl")
    data = source.read_bytes()
    partial = tmp_path / (source.name + ".partial")
    tail = CaptureTail(tmp_path)
    cuts = sorted({*range(300, len(data), 2_777), len(data)})
    for cut in cuts:
        partial.write_bytes(data[:cut])
        assert not tail.poll().restarted
        assert_same_as_full_read(tail, tmp_path)
    partial.rename(tmp_path / source.name)
    tail.poll()
    final = assert_same_as_full_read(tail, tmp_path)
    assert final.inputs[0].records == 48


def test_snapshot_leaves_the_normalizer_as_it_was() -> None:
    """`snapshot()` shows open flows as `finish()` would, and taking more records still works."""
    c = _session()
    records = c.records
    live = Normalizer()
    live.add_all(records[:8])
    drained = live.drain()
    shown = live.snapshot()
    assert shown.height == 2
    assert_frame_equal(shown, live.snapshot())  # again: the same
    whole = Normalizer()
    whole.add_all(records[:8])
    assert_frame_equal(pl.concat([drained.flows, shown]), whole.finish().flows)
    live.add_all(records[8:])
    after = Normalizer()
    after.add_all(records)
    assert_frame_equal(live.finish().events, after.finish().events.slice(drained.events.height))


def test_no_capture_file_yet(tmp_path: Path) -> None:
    tail = CaptureTail(tmp_path)
    with pytest.raises(UnreadableInput):
        tail.poll()
    partial = tmp_path / "capture-x-0000.jsonl.partial"
    partial.write_bytes(b"")
    assert tail.poll().changed
    assert [(name, size) for name, size, _ in tail.files] == [(partial.name, 0)]
    assert tail.report().counts == {"missing_close": 1}
    assert_same_as_full_read(tail, tmp_path)
    assert not tail.poll().changed


def test_a_partial_beside_its_renamed_file_is_read_once(tmp_path: Path) -> None:
    data = _join(_session().lines())
    (tmp_path / "cap.jsonl").write_bytes(data)
    leftover = tmp_path / "cap.jsonl.partial"
    leftover.write_bytes(data[:-40])
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)
    assert tail.report().counts == {"duplicate_file": 1}
    result = tail.poll()
    assert not result.changed and not result.restarted
    leftover.write_bytes(data + data[-40:])  # now the longer one
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)


SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def _progress(i: int) -> bytes:
    return (
        b'id: %d\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
        b'"params":{"progressToken":"p","progress":%d}}\n\n' % (i, i)
    )


def _poll_until(tail: CaptureTail, done: Any, timeout: float = 10.0) -> Timeline:
    """Poll (as the Live page's refresh does) until the timeline shows what `done` wants."""
    deadline = time.monotonic() + timeout
    while True:
        tail.poll()
        timeline = timeline_of(tail)
        if done(timeline):
            return timeline
        if time.monotonic() > deadline:
            raise AssertionError("the tail did not show the new records in time")
        time.sleep(0.05)


def _same_as_full_read_while_recording(tail: CaptureTail, out: Path) -> None:
    """`assert_same_as_full_read` at a moment the writer did not append in between (it still
    writes its periodic `capture_stats`): the files' sizes are the same before and after."""
    for _ in range(20):
        tail.poll()
        before = [(f.name, f.stat().st_size) for f in sorted(out.glob("capture-*"))]
        try:
            assert_same_as_full_read(tail, out)
            return
        except AssertionError:
            after = [(f.name, f.stat().st_size) for f in sorted(out.glob("capture-*"))]
            if after == before:
                raise
    raise AssertionError("the capture kept growing: no quiet moment to compare")


@pytest.mark.proxy
@pytest.mark.timeout(90)
def test_a_running_proxy_is_followed_while_it_records(tmp_path: Path) -> None:
    """The real `seamwatch proxy` records a paced event stream and a second request; the tail
    shows each new event while the stream (and the proxy) still runs, then the close."""
    out = tmp_path / "cap"
    parts = [_progress(i) for i in range(4)]

    def events_of(timeline: Timeline) -> list[str | None]:
        return _events(timeline)

    with Origin() as origin, run_proxy(origin.url, out) as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE_HEADERS, writes=parts, paced=True)
        origin.scripts["/ping"] = Script(
            headers=[("Content-Type", "application/json")],
            writes=[b'{"jsonrpc":"2.0","id":9,"result":{}}'],
            chunked=False,
        )
        tail = CaptureTail(out)
        with httpx.Client(timeout=10) as client, client.stream("GET", proxy.url + "/mcp") as r:
            chunks = r.iter_raw()
            got = b""
            for k in range(len(parts)):
                while len(got) < len(b"".join(parts[: k + 1])):
                    got += next(chunks)
                # Event k is on the client's side: the tail shows it, the stream still open.
                timeline = _poll_until(tail, lambda t, k=k: len(events_of(t)) == k + 1)
                assert events_of(timeline) == [str(i) for i in range(k + 1)]
                (flow,) = timeline.exchanges.collect().rows(named=True)
                assert flow["events"] == k + 1
                if k < len(parts) - 1:  # the origin ends the body right after the last event
                    assert flow["end_how"] is None
                assert not tail.poll().restarted
                origin.step()
            assert b"".join(chunks) == b""
            ended = _poll_until(
                tail, lambda t: t.exchanges.collect()["end_how"].to_list() == ["complete"]
            )
            assert proxy.proc.poll() is None
            assert len(events_of(ended)) == len(parts)
            client.post(proxy.url + "/ping", json={"jsonrpc": "2.0", "id": 9, "method": "ping"})
            both = _poll_until(
                tail,
                lambda t: t.exchanges.collect()["end_how"].to_list() == ["complete"] * 2,
            )
            assert sorted(both.exchanges.collect()["path"].to_list()) == ["/mcp", "/ping"]
            assert proxy.proc.poll() is None
            (name, _, _), *_ = tail.files
            assert name.endswith(".jsonl.partial")
            _same_as_full_read_while_recording(tail, out)
    # The proxy stopped: capture_close written, the file renamed; the offset is kept.
    result = tail.poll()
    assert not result.restarted
    (name, size, _), *_ = tail.files
    assert name.endswith(".jsonl") and result.bytes_read < size
    final = assert_same_as_full_read(tail, out)
    assert "missing_close" not in final.inputs[0].counts


def test_a_torn_tail_followed_by_the_next_rotation_stays_torn(tmp_path: Path) -> None:
    """The writer tore a line, then went on in its next file: the torn record is a lost line,
    not a `seq` gap, and if the torn file grows after that, reading starts over."""
    c = Capture(run_id="run-c").open(file_index=0)
    f = c.request("GET", headers={"mcp-session-id": "S"})
    c.response(f, sse=True)
    c.chunk(f, sse(event({"n": 1}, id="a")), n=0)
    first = c.lines()
    c.records.clear()
    c.open(file_index=1)
    c.chunk(f, sse(event({"n": 2}, id="b")), n=1)
    c.end(f)
    c.close()
    old = tmp_path / "capture-run-c-0000.jsonl.partial"
    old.write_bytes(_join(first[:-1]) + first[-1][:25])
    tail = CaptureTail(tmp_path)
    tail.poll()
    assert_same_as_full_read(tail, tmp_path)
    (tmp_path / "capture-run-c-0001.jsonl.partial").write_bytes(_join(c.lines()))
    assert not tail.poll().restarted
    timeline = assert_same_as_full_read(tail, tmp_path)
    assert tail.report().counts == {"torn_line": 1, "chunk_gap": 1}
    assert _events(timeline) == ["b"]
    old.write_bytes(_join(first))  # the torn line completed after all: not an append order
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)


# -- where the rows read are kept ---------------------------------------------------------------


def _many_flows(n: int) -> list[list[bytes]]:
    """A capture of `n` GET streams, two events each: the lines of each, capture_open first."""
    c = Capture(run_id="run-m").open()
    groups = [c.lines()]
    for k in range(n):
        c.records.clear()
        f = c.request("GET", headers={"mcp-session-id": "S"})
        c.response(f, sse=True)
        c.chunk(f, sse(event({"k": k}, id=f"{k}-a")), n=0)
        c.chunk(f, sse(event({"k": k, "more": "x" * k}, id=f"{k}-b")), n=1)
        c.end(f)
        groups.append(c.lines())
    return groups


def _collected(timeline: Timeline) -> dict[str, pl.DataFrame]:
    return {name: _sorted(frame.collect()) for name, frame in timeline.frames().items()}


def _assert_same_frames(got: dict[str, pl.DataFrame], expected: dict[str, pl.DataFrame]) -> None:
    for name, frame in expected.items():
        try:
            assert_frame_equal(got[name], frame)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def test_the_rows_read_are_kept_as_parquet_in_a_private_folder(tmp_path: Path) -> None:
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(_session().lines()))
    tail = CaptureTail(tmp_path)
    assert tail.folder is None
    tail.poll()
    folder = tail.folder
    assert folder is not None and folder.is_dir()
    assert not folder.is_relative_to(tmp_path)  # not beside the capture
    assert folder.stat().st_mode & 0o777 == 0o700
    parts = sorted(folder.glob("*.parquet"))
    assert parts and all(p.stat().st_mode & 0o777 == 0o600 for p in parts)
    # Every event read is in the parts (nothing only in memory), as a full read has them.
    on_disk = pl.read_parquet(folder / "events-*.parquet")
    full = read_timeline([tmp_path], cache=False)
    assert on_disk.height == full.sse_events.select(pl.len()).collect().item() == 7
    assert_same_as_full_read(tail, tmp_path)
    tail.close()


def test_close_removes_the_folder_and_a_later_poll_reads_again(tmp_path: Path) -> None:
    lines = _session().lines()
    partial = tmp_path / "capture-run-t-0000.jsonl.partial"
    partial.write_bytes(_join(lines[:9]))
    tail = CaptureTail(tmp_path)
    tail.poll()
    timeline_of(tail)
    folder = tail.folder
    assert folder is not None and any(folder.iterdir())
    tail.close()
    assert tail.folder is None
    assert not folder.exists()
    partial.write_bytes(_join(lines))
    result = tail.poll()
    assert result.changed and result.bytes_read == len(_join(lines))  # all of it, again
    assert tail.folder not in (None, folder)
    assert_same_as_full_read(tail, tmp_path)
    again = tail.folder
    assert again is not None
    del tail  # dropped without close(): the folder goes with it
    gc.collect()
    assert not again.exists()


def test_a_timeline_handed_out_still_collects_after_later_polls(tmp_path: Path) -> None:
    """Polls merge the small parts (and a restart drops them) while an earlier Timeline still
    scans them: it keeps its files until it is gone, even after `close()`."""
    groups = _many_flows(40)
    partial = tmp_path / "capture-run-m-0000.jsonl.partial"
    partial.write_bytes(_join(groups[0] + groups[1]))
    tail = CaptureTail(tmp_path)
    tail.poll()
    early = timeline_of(tail)
    seen = _collected(early)
    folder = tail.folder
    assert folder is not None
    for step in range(2, len(groups)):
        partial.write_bytes(_join([line for group in groups[: step + 1] for line in group]))
        assert tail.poll().changed
        if step % 13 == 0:
            assert_same_as_full_read(tail, tmp_path)
    final = assert_same_as_full_read(tail, tmp_path)
    assert _events(final)[-2:] == ["39-a", "39-b"]
    # 40 polls wrote 40 event parts; the small ones were merged as they came.
    live_parts = {p.name for p in folder.glob("events-*.parquet")}
    assert len(live_parts) < 20
    _assert_same_frames(_collected(early), seen)

    partial.write_bytes(_join(groups[0]))  # shorter: read again from the start
    assert tail.poll().restarted
    assert_same_as_full_read(tail, tmp_path)
    _assert_same_frames(_collected(early), seen)
    tail.close()
    assert folder.exists()  # `early` still scans it
    _assert_same_frames(_collected(early), seen)
    del early, final
    gc.collect()
    assert not folder.exists()


def test_the_dashboard_closes_a_tail_it_drops(tmp_path: Path) -> None:
    """The Live page keeps a tail per path (at most 4): one evicted lets its folder go."""
    import streamlit as st

    from dashboards import data

    st.cache_resource.clear()
    paths = []
    for k in range(5):
        folder = tmp_path / f"cap{k}"
        folder.mkdir()
        (folder / "capture-run-t-0000.jsonl.partial").write_bytes(_join(_session().lines()))
        paths.append(str(folder))
    state = data.live_state(paths[0])
    assert _events(state.timeline)[-1] == "g3"
    live, _ = data._capture_tail(paths[0])
    tail = live.tail
    kept = tail.folder
    assert kept is not None and kept.exists()
    del state
    for path in paths[1:]:
        data._capture_tail(path)  # a fifth path evicts the first
    assert tail.folder is None
    assert not kept.exists()
    st.cache_resource.clear()
