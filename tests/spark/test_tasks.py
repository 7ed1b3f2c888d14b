"""What the Spark engine's executors run, without Spark (analyzer/spark/tasks.py)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

from analyzer import schema as S
from analyzer.analysis import read_timeline
from analyzer.detectors import CROSS_SESSION, PER_SESSION, run_detectors
from analyzer.findings import FINDINGS_SCHEMA, finish_findings
from analyzer.ingest import read_inputs
from analyzer.spark import tasks
from tests.support.records import Capture, event, req, res, sse

PER_SESSION_IDS = tuple(det.id for det in PER_SESSION)


def sid(s: str) -> dict[str, str]:
    return {"Mcp-Session-Id": s}


def faulty_capture(path: Path) -> Path:
    """Two sessions of one client and two anonymous flows: A's stream breaks and its resume
    gets e2 again with another payload (duplicate-event-id); B carries A's cursor."""
    c = Capture().open()
    for s, cursor in (("A", None), ("B", "e2")):
        headers = {"Last-Event-ID": cursor} if cursor else {}
        f = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"), headers=headers)
        c.response(f, body=res(0, protocolVersion="2025-06-18"), headers=sid(s))
        c.end(f)
    f = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=sid("A"))
    c.response(f, sse=True)
    c.chunk(f, sse(event(req("notifications/message", data="one"), id="e1")), n=0)
    c.chunk(f, sse(event(req("notifications/message", data="two"), id="e2")), n=1)
    c.end(f, "server_closed")
    g = c.request("GET", headers={**sid("A"), "Last-Event-ID": "e1"})
    c.response(g, sse=True)
    c.chunk(g, sse(event(req("notifications/message", data="other"), id="e2")), n=0)
    c.chunk(g, sse(event(res(1, content=[]), id="e3")), n=1)
    c.end(g)
    for n in (1, 2):  # a 2025 server without sessions
        f = c.request(body=req("ping", n), client="10.0.0.9:4000")
        c.response(f, body=res(n))
        c.end(f)
    c.close()
    return c.write(path / "capture-run-1-0000.jsonl")


def ingested(paths: list[Path]) -> pa.Table:
    batch = pa.RecordBatch.from_pylist(
        [{"input": i, "path": str(p)} for i, p in enumerate(paths)],
        schema=pa.schema([("input", pa.int32()), ("path", pa.string())]),
    )
    out = list(tasks.ingest_inputs(iter([batch]), tasks.Options(cache=False)))
    return pa.Table.from_batches(out, schema=tasks.RECORDS)


def findings_of(out: pa.Table) -> pl.DataFrame:
    rows = pl.from_arrow(out)
    assert isinstance(rows, pl.DataFrame)
    blobs = rows.filter(pl.col("what") == "finding")["blob"].to_list()
    return finish_findings(tasks.unpack(blobs, FINDINGS_SCHEMA))


def test_pack_and_unpack_round_trip() -> None:
    frame = pl.DataFrame({"a": [1, 2], "b": [["x"], []]})
    assert_frame_equal(tasks.unpack([tasks.pack(frame), tasks.pack(frame)], frame.schema),
                       pl.concat([frame, frame]))  # fmt: skip
    assert tasks.unpack([], S.PAYLOADS).schema == S.PAYLOADS


def test_a_group_holds_its_sessions_and_an_address_its_anonymous_flows(tmp_path: Path) -> None:
    records = ingested([faulty_capture(tmp_path)])
    flows = records.filter(pa.compute.equal(records["table"], "flows"))
    assert sorted(flows["group"].to_pylist()) == ["anon@10.0.0.9", "mcp:A", "mcp:B"]


def test_each_group_alone_gives_the_per_session_findings_of_the_whole(tmp_path: Path) -> None:
    path = faulty_capture(tmp_path)
    records = ingested([path])
    rows = pl.from_arrow(records)
    assert isinstance(rows, pl.DataFrame)
    options = tasks.Options(detectors=PER_SESSION_IDS)
    parts = [
        findings_of(tasks.analyze_groups(group.to_arrow(), options, links=False))
        for group in rows.filter(pl.col("table") != "report").partition_by("group")
    ]
    whole = run_detectors(read_timeline([path], cache=False), only=PER_SESSION_IDS)
    assert not whole.filter(pl.col("detector") == "duplicate-event-id").is_empty()
    assert_frame_equal(finish_findings(pl.concat(parts)), whole)


def test_a_flow_two_inputs_hold_is_kept_once_and_counted(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    two = tmp_path / "two"
    two.mkdir()
    first = faulty_capture(one)
    (two / first.name).write_bytes(first.read_bytes())
    raw, dropped = tasks.raw_tables(ingested([one, two]).filter(
        pa.compute.not_equal(pa.compute.field("table"), "report")))  # fmt: skip
    merged = read_inputs([one, two], cache=False)
    assert dropped.rows() == [(1, merged.inputs[1].counts["duplicate_flow"])] == [(1, 6)]
    flows = raw.flows.collect()
    assert flows.height == 6 and flows["input"].unique().to_list() == [0]
    events = raw.events.collect()
    assert events.height == events.unique(["flow_id", "ordinal"]).height


def test_the_analysis_yields_links_sessions_and_counts(tmp_path: Path) -> None:
    records = ingested([faulty_capture(tmp_path)])
    kept = records.filter(pa.compute.not_equal(records["table"], "report"))
    out = pl.from_arrow(tasks.analyze_groups(kept, tasks.Options(), links=True))
    assert isinstance(out, pl.DataFrame)
    counts = dict(out.filter(pl.col("what") == "count").select("key", "n").iter_rows())
    assert counts["sessions"] == 3
    sessions = set(out.filter(pl.col("what") == "session").select("key", "session").iter_rows())
    assert ("mcp:B", "mcp:B") in sessions
    wanted = out.filter((pl.col("what") == "link") & pl.col("wants"))
    assert ("id:e2", "mcp:B") in set(wanted.select("key", "session").iter_rows())
    assert out.filter(pl.col("what") == "finding").is_empty()  # no detector asked for


@pytest.mark.parametrize("detector", sorted(CROSS_SESSION))
def test_cross_session_ids_are_registered(detector: str) -> None:
    assert detector not in PER_SESSION_IDS
