"""dashboards.queries: the dashboard's selections of the timeline, without streamlit."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from analyzer.ingest import UnreadableInput
from dashboards import queries
from tests.support.records import Capture, req

SESSION = "mcp:rr-1"


def test_signature_follows_size_and_mtime(tmp_path: Path) -> None:
    c = Capture().open()
    c.request(body=req("ping", 1))
    partial = c.write(tmp_path / "capture-x-0000.jsonl.partial")
    first = queries.signature((str(tmp_path),))
    assert [name for name, _, _ in first] == ["capture-x-0000.jsonl.partial"]
    assert queries.signature((str(tmp_path),)) == first  # unchanged: same key, nothing re-read
    c.request(body=req("ping", 2))
    c.write(partial)
    os.utime(partial, ns=(first[0][2] + 1_000_000, first[0][2] + 1_000_000))
    assert queries.signature((str(tmp_path),)) != first
    assert queries.signature((str(partial),))[0][0] == partial.name  # a single file


def test_signature_of_an_empty_directory_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput):
        queries.signature((str(tmp_path),))


def test_the_queries_take_a_timeline_and_need_no_page(lab_capture: Path) -> None:
    timeline = read_timeline([lab_capture])
    overview = queries.overview_of(timeline)
    assert (overview.records, overview.sessions, overview.streams, overview.events) == (
        48,
        1,
        2,
        21,
    )
    assert queries.sessions_of(timeline)["session_id"].to_list() == [SESSION]
    recent = queries.recent_of(timeline, 3)
    assert recent.height == 3 and recent["ts"].is_sorted(descending=True)
    asked: list[tuple[str, ...]] = []

    def texts(hashes: tuple[str, ...]) -> dict[str, str]:
        asked.append(hashes)
        return {h: "x" * (queries.PREVIEW_CHARS + 5) for h in hashes}

    view = queries.session_view_of(timeline, SESSION, texts)
    assert asked and set(view.previews) == set(asked[-1])
    assert all(len(text) == queries.PREVIEW_CHARS for text in view.previews.values())
    found = queries.run_detectors(timeline, {})
    first = found.row(0, named=True)
    evidence = queries.evidence_of(timeline, first, texts)
    assert evidence.finding == first
    assert set(evidence.exchanges["flow_id"]) >= set(first["flow_ids"])
    only = queries.run_detectors(timeline, {"only": "repeated-tool-call"})
    assert set(only["detector"]) <= {"repeated-tool-call", "analysis-error"}
    assert pl.DataFrame(only).height <= found.height
