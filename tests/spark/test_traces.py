"""The Spark engine's OTLP export without Spark: what its tasks run and what its driver decides
(analyzer/spark/traces.py). The session groups are drafted apart, as the executors draft them,
and the document compared with the default engine's; both engines, in Spark, in test_init.py."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.analysis import read_timeline
from analyzer.detectors import run_detectors
from analyzer.findings import findings_frame, finish_findings
from analyzer.otlp.command import otlp_json
from analyzer.spark import tasks, traces
from tests.support.records import Capture, event, req, res, sse


def sid(s: str) -> dict[str, str]:
    return {"Mcp-Session-Id": s}


def ingested(path: Path) -> pa.Table:
    """The `RECORDS` rows of a capture, as the ingest stage yields them (reports left out)."""
    batch = pa.RecordBatch.from_pylist([{"input": 0, "path": str(path)}])
    out = pa.Table.from_batches(tasks.ingest_inputs(iter([batch]), tasks.Options(cache=False)))
    return out.filter(pc.not_equal(out["table"], "report"))


def document(units: list[pl.DataFrame], findings: pl.DataFrame) -> str:
    """`export_traces` by hand: each unit (the `RECORDS` rows of some groups) drafted, each
    finding put on the least ranked span a unit offers, the traces' texts in order."""
    shipped = tasks.pack(findings)
    drafted = []
    for unit in units:  # the captures here reach one origin
        drafted_unit = traces.draft_traces(
            unit.to_arrow(), shipped, payloads=True, several_origins=False
        )
        frame = pl.from_arrow(drafted_unit)
        assert isinstance(frame, pl.DataFrame)
        drafted.append(frame)
    rows = pl.concat(drafted)
    offers = rows.filter(pl.col("what") == "finding").sort("finding", "rank", "span")
    best = offers.unique("finding", keep="first", maintain_order=True)
    placed = dict(zip(best["finding"].to_list(), best["span"].to_list(), strict=True))
    earliest = rows.filter(pl.col("what") == "trace")["start"].min()
    assert earliest is None or isinstance(earliest, int)
    targets, captured = traces.place_findings(findings, placed, earliest)
    texts = []
    for frame in drafted:
        kept = frame.filter(pl.col("what") == "trace").select("start", "span", "blob").to_arrow()
        for batch in traces.trace_texts(iter(kept.to_batches()), shipped, targets):
            texts.extend((r["start"], r["span"], r["text"]) for r in batch.to_pylist())
    pieces: list[str] = []
    traces.write_document(sorted(texts), captured, pieces.append)
    return "".join(pieces)


def units_of(path: Path, *together: str) -> list[pl.DataFrame]:
    """The capture's groups, each its own unit but those named `together` (one unit)."""
    rows = pl.from_arrow(ingested(path))
    assert isinstance(rows, pl.DataFrame)
    joined = pl.col("group").is_in(list(together))
    units = rows.filter(~joined).partition_by("group")
    return [*units, rows.filter(joined)] if together else units


def two_sessions(path: Path) -> tuple[Path, dict[str, str]]:
    """Session A resumes its own stream; session C calls a tool; a 2025 server without
    sessions answers a ping. Returns the capture and the flow id of each exchange by name."""
    c = Capture().open()
    flows = {}
    for s in ("A", "C"):
        f = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"))
        c.response(f, body=res(0, protocolVersion="2025-06-18"), headers=sid(s))
        c.end(f)
        flows[f"init {s}"] = f
    f = c.request(body=req("tools/call", 1, name="t", arguments={"n": 1}), headers=sid("A"))
    c.response(f, sse=True)
    c.chunk(f, sse(event(req("notifications/message", data="one"), id="e1")), n=0)
    c.end(f, "server_closed")
    flows["call A"] = f
    g = c.request("GET", headers={**sid("A"), "Last-Event-ID": "e1"})
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(1, content=[]), id="e2")), n=0)
    c.end(g)
    flows["resume A"] = g
    f = c.request(body=req("tools/call", 2, name="t", arguments={"n": 2}), headers=sid("C"))
    c.response(f, body=res(2, content=[{"type": "text", "text": "done"}]))
    c.end(f)
    flows["call C"] = f
    f = c.request(body=req("ping", 3), client="10.0.0.9:4000")
    c.response(f, body=res(3))
    c.end(f)
    c.close()
    return c.write(path / "capture-run-1-0000.jsonl"), flows


def planted_finding(
    detector: str, severity: str, session: str | None, title: str, **evidence: list[str]
) -> dict[str, object]:
    return {"detector": detector, "severity": severity, "session": session, "title": title,
            "detail": f"{title}: what happened", **evidence}  # fmt: skip


def test_groups_drafted_apart_give_the_default_engines_document(tmp_path: Path) -> None:
    path, flows = two_sessions(tmp_path)
    timeline = read_timeline([path], cache=False)
    planted = findings_frame(
        [
            # Its session's flow comes second: it goes on C's exchange, in another group.
            planted_finding("repeated-tool-call", "high", "mcp:A", "first evidence elsewhere",
                            flow_ids=["gone", flows["call C"], flows["call A"]]),
            planted_finding("causal-gap", "medium", "mcp:A", "on the stream",
                            stream_ids=[flows["call A"]]),
            planted_finding("capture-health", "high", None, "no session"),
            planted_finding("stale-cursor", "info", "mcp:gone", "a session without exchanges"),
        ]
    )  # fmt: skip
    findings = finish_findings(pl.concat([run_detectors(timeline), planted]))
    units = units_of(path)
    assert len(units) == 3  # mcp:A, mcp:C and the anonymous address
    expected = otlp_json(timeline, findings, payloads=True)
    got = document(units, findings)
    assert got == expected
    spans = json.loads(got)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    (call_c,) = [s for s in spans if s["name"] == "tools/call t" and "events" in s]
    titles = [a["value"]["stringValue"] for e in call_c["events"] for a in e["attributes"]
              if a["key"] == "seamwatch.finding.title"]  # fmt: skip
    assert titles == ["first evidence elsewhere"]
    assert [s["name"] for s in spans].count("seamwatch capture") == 2


def carried_cursor(path: Path) -> Path:
    """B resumes with a cursor A's stream issued (a client carrying it into a new session)."""
    c = Capture().open()
    for s in ("A", "B"):
        f = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"))
        c.response(f, body=res(0, protocolVersion="2025-06-18"), headers=sid(s))
        c.end(f)
    f = c.request(body=req("tools/call", 1, name="t", arguments={}), headers=sid("A"))
    c.response(f, sse=True)
    c.chunk(f, sse(event(req("notifications/message", data="one"), id="e1")), n=0)
    c.end(f, "server_closed")
    g = c.request("GET", headers={**sid("B"), "Last-Event-ID": "e1"})
    c.response(g, sse=True)
    c.chunk(g, sse(event(res(1, content=[]), id="e2")), n=0)
    c.end(g)
    c.close()
    return c.write(path / "capture-run-1-0000.jsonl")


def test_related_sessions_drafted_together_keep_the_link_into_the_issuers_trace(
    tmp_path: Path,
) -> None:
    # B resumes with A's cursor: its resume links to the incarnation of A that issued it.
    path = carried_cursor(tmp_path)
    timeline = read_timeline([path], cache=False)
    status = timeline.resumptions.select("status").collect()["status"].to_list()
    assert status == ["other_session"]
    findings = run_detectors(timeline)
    expected = otlp_json(timeline, findings, payloads=True)
    assert document(units_of(path, "mcp:A", "mcp:B"), findings) == expected
    # Apart, B's task has no span of A to link to: why a component is drafted in one task.
    apart = document(units_of(path), findings)
    assert apart != expected
    assert apart.count('"resumed-from"') < expected.count('"resumed-from"')


def test_no_group_no_finding_is_the_empty_document() -> None:
    empty = pa.Table.from_pylist([], schema=tasks.RECORDS)
    findings = finish_findings(findings_frame([]))
    assert document([pl.DataFrame(empty)], findings) == '{"resourceSpans":[]}\n'


def test_span_ids_in_hex_sort_as_the_ids() -> None:
    ids = [2**64 - 1, 1, 2**63, 255, 2**32]
    assert [int(h, 16) for h in sorted(map(traces.span_hex, ids))] == sorted(ids)
    assert {len(traces.span_hex(i)) for i in ids} == {16}
