"""capture-health: damaged inputs and streams open at capture end (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from analyzer import schema as S
from analyzer.detectors import capture_health, run_detectors
from analyzer.findings import FINDINGS_SCHEMA, fingerprint
from analyzer.schema import EXCHANGES
from tests.support.records import Capture, req, res

T0_NS = 1_750_000_000_000_000_000


@dataclass(frozen=True)
class Input:
    """The fields of `analyzer.ingest.common.InputReport` the detector reads."""

    path: str
    records: int = 100
    skipped: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def exchanges(*rows: dict[str, object]) -> pl.LazyFrame:
    full = [{name: row.get(name) for name in EXCHANGES} for row in rows]
    return pl.DataFrame(full, schema=EXCHANGES).lazy()


def flow(
    flow_id: str, session: str, ms: int, end_how: str | None, **more: object
) -> dict[str, Any]:
    return {
        "session_id": session,
        "flow_id": flow_id,
        "stream_id": flow_id,
        "ts": T0_NS + ms * 1_000_000,
        "seq": ms,
        "end_how": end_how,
        "era": "2025-06-18",
    } | more


def timeline(inputs: tuple[Input, ...] = (), *flows: dict[str, object]) -> Any:
    return SimpleNamespace(
        inputs=inputs, exchanges=exchanges(*flows), messages=S.empty(S.MESSAGES).lazy()
    )


def run(tl: Any) -> pl.DataFrame:
    return run_detectors(tl, only=["capture-health"])


def test_clean_capture_has_no_finding() -> None:
    tl = timeline((Input("cap"),), flow("f1", "mcp:a", 1, "complete"), flow("f2", "mcp:a", 2, None))
    assert run(tl).height == 0


@pytest.mark.parametrize(
    ("report", "severity"),
    [
        (Input("cap/run-1.jsonl.partial", skipped=1, counts={"torn_line": 1}), "low"),
        # Records the capture lost (a full disk, a full queue): high, so the default gate fails.
        (Input("cap", counts={"seq_gap": 3}, warnings=("3 record(s) missing",)), "high"),
        (Input("cap", counts={"writer_dropped": 7}, warnings=("7 dropped",)), "high"),
        # Near miss: addon errors alone (a repaired surrogate) lose no record.
        (Input("cap", counts={"addon_errors": 1}, warnings=("1 addon error",)), "low"),
        (Input("cap", counts={"missing_close": 1}, warnings=("1 unclean stop",)), "low"),
        (Input("cap", counts={"undecoded_body": 2}, warnings=("2 not decoded",)), "low"),
        (
            Input("cap.jsonl", counts={"bom": 1}, warnings=("1 byte order mark(s) stripped",)),
            "info",
        ),
    ],
)
def test_damaged_input(report: Input, severity: str) -> None:
    got = run(timeline((Input("clean"), report)))
    assert got.height == 1
    finding = got.row(0, named=True)
    assert finding["severity"] == severity
    assert finding["session"] is None
    assert report.path in finding["detail"]
    for warning in report.warnings:
        assert warning in finding["title"] and warning in finding["detail"]


def test_damaged_input_fingerprint_keeps_to_the_file_name() -> None:
    here = run(timeline((Input("/a/cap.jsonl", counts={"seq_gap": 1}, warnings=("1 gap",)),)))
    there = run(timeline((Input("/b/cap.jsonl", counts={"seq_gap": 9}, warnings=("9 gaps",)),)))
    assert here["fingerprint"].item() == there["fingerprint"].item()
    assert here["fingerprint"].item() == fingerprint(
        "capture-health", None, extra=["cap.jsonl", "seq_gap"]
    )


def test_streams_open_at_shutdown_one_info_finding_per_session() -> None:
    tl = timeline(
        (),
        flow("f3", "mcp:a", 30, "open_at_shutdown", end_ts=T0_NS + 90_000_000),
        flow("f1", "mcp:a", 10, "open_at_shutdown", stream_id=None),
        flow("f2", "mcp:a", 20, "complete"),
        flow("f9", "mcp:b", 5, "open_at_shutdown"),
    )
    got = run(tl)
    assert got.schema == FINDINGS_SCHEMA
    rows = got.select("session", "severity", "flow_ids", "stream_ids", "era").rows()
    assert rows == [
        ("mcp:a", "info", ["f1", "f3"], ["f3"], "2025-06-18"),
        ("mcp:b", "info", ["f9"], ["f9"], "2025-06-18"),
    ]
    first = got.row(0, named=True)
    assert first["title"] == "2 response(s) open at capture end"
    assert first["first_ts"] < first["last_ts"]
    assert got.select(pl.col("last_ts").dt.epoch("ns")).item(0, 0) == T0_NS + 90_000_000


def test_module_row() -> None:
    assert capture_health.DETECTOR.id == "capture-health"
    assert capture_health.DETECTOR.thresholds == {}


def _tool_call_capture(folder: Path, depth: int) -> Path:
    """A session whose one tools/call carries arguments nested `depth` lists deep."""
    c = Capture().open()
    init = c.request(headers={}, body=req("initialize", 0, protocolVersion="2025-06-18"))
    c.response(init, headers={"mcp-session-id": "S"}, body=res(0, protocolVersion="2025-06-18"))
    c.end(init)
    nested = "[" * depth + "]" * depth
    call = c.request(
        headers={"mcp-session-id": "S"},
        body=(
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay",'
            f'"arguments":{{"a":{nested}}}}}}}'
        ).encode(),
    )
    c.response(call, body=res(1, content=[]))
    c.end(call)
    c.close()
    folder.mkdir()
    (folder / "c.jsonl").write_bytes(b"\n".join(c.lines()) + b"\n")
    return folder


@pytest.mark.parametrize(
    ("depth", "titles", "calls"),
    [
        (3000, ["1 message(s) nested too deeply to read"], 0),  # past what json can read
        (1000, [], 1),  # near miss: deep, but read and canonicalized
        (1, [], 1),  # clean
    ],
    ids=["too-deep", "deep", "flat"],
)
def test_tool_call_arguments_too_deep_to_read_are_reported(
    tmp_path: Path, depth: int, titles: list[str], calls: int
) -> None:
    from analyzer.analysis import read_timeline

    tl = read_timeline([_tool_call_capture(tmp_path / "cap", depth)], cache=False)
    assert tl.tool_calls.collect().height == calls
    got = run(tl)
    assert got["title"].to_list() == titles
    if titles:
        assert got.row(0, named=True)["severity"] == "low"
        assert got.row(0, named=True)["session"] == "mcp:S"
