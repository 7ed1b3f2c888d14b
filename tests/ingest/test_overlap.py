"""Inputs that hold the same flows (one capture under two paths, a copied file) are read once."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analyzer.cli import main
from analyzer.ingest import read_inputs
from tests.support import traffic


def _capture(folder: Path, records: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "c.jsonl").write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    return folder


def _renamed(records: list[dict[str, object]], suffix: str) -> list[dict[str, object]]:
    """The same traffic as other flows (another proxy run would give other ids)."""
    return [{**r, "flow": f"{r['flow']}{suffix}"} if "flow" in r else r for r in records]


def test_a_copy_of_a_capture_adds_no_flow(tmp_path: Path) -> None:
    records = traffic.capture_records()
    a = _capture(tmp_path / "a", records)
    b = _capture(tmp_path / "b", records)
    for cache in (False, True, True):  # parsed, then written to and read from the cache
        both, one = read_inputs([a, b], cache=cache), read_inputs([a], cache=cache)
        for table in ("flows", "events", "messages", "tools"):
            assert (
                both.scan(table)
                .collect()
                .drop("input", strict=False)
                .equals(one.scan(table).collect().drop("input", strict=False))
            ), table
        assert both.inputs[0].counts == one.inputs[0].counts
        assert both.inputs[1].counts["duplicate_flow"] == 4
        assert "4 flow(s) already read from an earlier input, ignored" in both.inputs[1].warnings


def test_only_the_flows_read_before_are_left_out(tmp_path: Path) -> None:
    records = traffic.capture_records()
    flows = [r for r in records if r.get("kind") == "request"]
    a = _capture(tmp_path / "a", records)
    # b: the same traffic as new flows, and one flow of a again (its request only).
    b = _capture(tmp_path / "b", [*_renamed(records, "-b"), flows[0]])
    ingested = read_inputs([a, b], cache=False)
    assert ingested.inputs[1].counts.get("duplicate_flow") == 1
    by_input = ingested.scan("flows").group_by("input").agg(pl.len()).sort("input").collect()
    assert by_input.rows() == [(0, 4), (1, 4)]
    alone = read_inputs([tmp_path / "b"], cache=False)
    assert "duplicate_flow" not in alone.inputs[0].counts
    assert alone.scan("flows").collect().height == 5


def test_clean_traffic_under_two_paths_stays_clean(tmp_path: Path) -> None:
    records = traffic.capture_records()
    a = _capture(tmp_path / "a", records)
    b = _capture(tmp_path / "b", records)
    reports = []
    for paths in ([a], [a, b]):
        out = tmp_path / f"report-{len(paths)}.json"
        args = [*map(str, paths), "--format", "json", "--out", str(out), "--fail-on", "none"]
        assert main(["analyze", *args]) == 0
        reports.append(json.loads(out.read_text()))
    one, two = ({f["detector"] for f in r["findings"]} for r in reports)
    assert two - one == {"capture-health"}  # the copy is reported, and adds nothing else
    counted = ("sessions", "streams", "resumptions", "tool_calls")
    assert [reports[1]["summary"][k] for k in counted] == [
        reports[0]["summary"][k] for k in counted
    ]


def _har(path: Path, methods: list[str]) -> Path:
    entries = [
        {
            "startedDateTime": f"2025-06-15T15:06:4{i}.000Z",
            "time": 10,
            "request": {"method": "POST", "url": "http://mcp.test/mcp", "headers": []},
            "response": {
                "status": 200,
                "headers": [{"name": "Content-Type", "value": "application/json"}],
                "content": {"mimeType": "application/json", "text": f'{{"m": "{m}"}}'},
            },
        }
        for i, m in enumerate(methods)
    ]
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    return path


def test_a_har_under_two_names_is_read_once_and_two_hars_are_both_read(tmp_path: Path) -> None:
    one = _har(tmp_path / "one.har", ["a", "b"])
    copy = tmp_path / "copy.har"
    copy.write_bytes(one.read_bytes())
    other = _har(tmp_path / "other.har", ["a", "c"])
    same = read_inputs([one, copy], cache=False)
    assert same.inputs[1].counts.get("duplicate_flow") == 2
    assert same.scan("flows").collect().height == 2
    both = read_inputs([one, other], cache=False)
    assert "duplicate_flow" not in both.inputs[1].counts
    assert both.scan("flows").collect().height == 4
