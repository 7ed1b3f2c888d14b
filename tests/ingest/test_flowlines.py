"""A capture read a file at a time (analyzer/ingest/flowlines.py with `read_capture_file`)
gives what the whole-capture reader gives: the same tables, the same report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from analyzer import schema as S
from analyzer.ingest.bulk import flow_ids
from analyzer.ingest.flowlines import file_lines, flow_lines, read_flow_lines
from analyzer.ingest.jsonl import capture_report, read_capture, read_capture_file
from analyzer.ingest.lines import capture_files, plan
from tests.support.rotated import write_rotated

_ORDER = {"payloads": ["data_hash"], "flows": ["flow_id"], "tools": ["flow_id", "seq", "tool_name"]}


def _tables(folder: Path) -> dict[str, pl.DataFrame]:
    """Every table of the parts in `folder` (and its subfolders), in one row order."""
    tables = {}
    for table, schema in S.RAW_TABLES.items():
        files = sorted(folder.rglob(f"{table}-*.parquet"))
        frame = pl.read_parquet(files, schema=schema) if files else S.empty(schema)
        if table == "payloads":
            frame = frame.unique("data_hash")
        tables[table] = frame.sort(_ORDER.get(table, ["flow_id", "seq", "ordinal"]))
    return tables


def test_read_a_file_at_a_time_gives_the_whole_capture(tmp_path: Path) -> None:
    folder = write_rotated(tmp_path / "capture")
    whole = tmp_path / "whole"
    whole.mkdir()
    expected = read_capture(folder, whole, workers=1)

    counts: Counter[str] = Counter()
    cuts: dict[str, int] = {}
    files = plan(capture_files(folder), counts, cuts)
    named = [set(flow_ids(file_lines(f.path)[0]).drop_nulls().to_list()) for f in files]
    crossing = {flow for flow in set().union(*named) if sum(flow in n for n in named) > 1}
    assert crossing == {"f2", "f3"}  # the GET stream and the tools/call
    parts, lines, base = [], [], 0
    for order, file in enumerate(files):
        out = tmp_path / "parts" / str(order)
        out.mkdir(parents=True)
        skip = frozenset(crossing & named[order])
        parts.append(read_capture_file(file, out, base=base, skip=skip))
        lines += flow_lines(file, order, base, skip)
        base += len(file_lines(file.path)[0])
    out = tmp_path / "parts" / "crossing"
    out.mkdir()
    parts.append(read_flow_lines(sorted(lines), files, out))
    report = capture_report(folder, files, counts, parts, cuts)

    assert report == expected
    assert expected.counts == {"bom": 1, "missing_close": 1, "seq_gap": 1, "torn_line": 1}
    got, want = _tables(tmp_path / "parts"), _tables(whole)
    for table in S.RAW_TABLES:
        assert_frame_equal(got[table], want[table])
    assert want["events"].filter(pl.col("flow_id") == "f2")["event_id"].to_list() == ["1", "2", "1"]
