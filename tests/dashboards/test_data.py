"""dashboards.data: the loaders' frames on the stored lab capture, and the signature key."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from dashboards import data

pytestmark = pytest.mark.usefixtures("fresh_caches")

SESSION = "mcp:rr-1"


def test_source_reads_the_launcher_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.SOURCE_ENV, '["a/capture", "b.har"]')
    assert data.source() == ("a/capture", "b.har")
    monkeypatch.setenv(data.SOURCE_ENV, "some/capture")  # a hand-made start: one path
    assert data.source() == ("some/capture",)
    monkeypatch.setenv(data.SOURCE_ENV, "[x]")  # not a JSON list of paths: a path
    assert data.source() == ("[x]",)
    monkeypatch.setenv(data.SOURCE_ENV, "")
    assert data.source() is None


def test_overview_counts(lab_capture: Path) -> None:
    source = (str(lab_capture),)
    got = data.overview(source, data.signature(source))
    assert (got.records, got.skipped, got.losses, got.unclean_stops) == (48, 0, 0, 0)
    assert (got.sessions, got.streams, got.incarnations, got.resumptions, got.tool_calls) == (
        1,
        2,
        3,
        1,
        2,
    )
    assert (got.exchanges, got.events) == (8, 21)
    assert got.inputs["path"].to_list() == list(source)
    assert got.first_ts is not None and got.last_ts is not None and got.first_ts < got.last_ts


def test_findings_are_the_analyzers(lab_capture: Path) -> None:
    from analyzer.detectors import run_detectors

    source = (str(lab_capture),)
    got = data.findings(source, data.signature(source))
    assert got.equals(run_detectors(read_timeline(list(source))))


def test_findings_follow_the_analysis_options(
    lab_capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `seamwatch dashboard --only ... --config ...` hands the app: the page shows what
    # `seamwatch analyze` with the same options reports.
    from analyzer.detectors import load_config, run_detectors

    config = tmp_path / "seamwatch.toml"
    config.write_text("[detectors.repeated-tool-call]\nwindow_s = 0.001\n")
    options = {"only": "repeated-tool-call,lost-response", "config": str(config)}
    monkeypatch.setenv(data.OPTIONS_ENV, json.dumps(options))
    source = (str(lab_capture),)
    got = data.findings(source, data.signature(source))
    want = run_detectors(
        read_timeline(list(source)),
        only=["repeated-tool-call", "lost-response"],
        config=load_config(config),
    )
    assert got.equals(want)
    assert set(got["detector"].to_list()) == {"lost-response"}  # the window hides the repeat


def test_session_view(lab_capture: Path) -> None:
    source = (str(lab_capture),)
    view = data.session_view(source, data.signature(source), SESSION)
    assert view.session["session_id"] == SESSION
    assert (view.streams.height, view.incarnations.height, view.events.height) == (2, 3, 21)
    assert view.resumptions["cursor"].to_list() == ["e7"]
    # every SSE event carrying a message knows its kind and method
    carried = view.events.filter(~pl.col("id_only"))
    assert carried["rpc_kind"].null_count() == 0
    e2 = view.events.filter(pl.col("event_id") == "e2")["rpc_method"].to_list()
    assert e2 == ["notifications/progress", "notifications/message"]
    # previews for every payload, cut at PREVIEW_CHARS
    hashes = set(view.events["data_hash"].drop_nulls()) | set(view.messages["data_hash"])
    assert hashes <= set(view.previews)
    assert all(len(text) <= data.PREVIEW_CHARS for text in view.previews.values())


def test_evidence_of_a_repeated_tool_call(lab_capture: Path) -> None:
    from analyzer.findings import findings_frame

    source = (str(lab_capture),)
    sig = data.signature(source)
    timeline = read_timeline(list(source))
    calls = timeline.tool_calls.sort("ts").collect()
    planted = findings_frame(
        [
            {
                "detector": "repeated-tool-call",
                "severity": "high",
                "session": SESSION,
                "title": "t",
                "detail": "d",
                "flow_ids": calls["flow_id"].to_list(),
                "stream_ids": calls["stream_id"].to_list(),
                "request_ids": ["4", "5"],
                "event_ids": ["e2"],
                "first_ts": calls["ts"][0],
                "last_ts": calls["ts"][1],
            }
        ]
    )
    fingerprint = planted["fingerprint"][0]
    original = data.findings
    try:
        data.findings = lambda p, s: planted  # type: ignore[assignment]
        proof = data.evidence(source, sig, fingerprint)
    finally:
        data.findings = original  # type: ignore[assignment]
    assert proof.calls["request_id"].to_list() == ["4", "5"]
    assert proof.calls["result_delivered"].to_list() == [False, True]
    texts = [proof.texts[h] for h in proof.calls["request_body_hash"]]
    assert all('"create_ticket"' in text for text in texts)
    assert proof.calls["result_data_hash"].null_count() == 1  # only the second got a result
    assert proof.events["event_id"].to_list() == ["e2", "e2"]
    assert proof.events["replica"].to_list() == ["replica-a", "replica-b"]
    assert proof.incarnations.height == 3
    between = proof.between
    assert between["ts"].is_sorted()
    assert between["what"][0] == "request POST → 200"
    assert "stream end: client_closed" in between["what"].to_list()
    assert between["ts"][-1] == calls["ts"][1]


def test_recent_exchanges_newest_first(lab_capture: Path) -> None:
    source = (str(lab_capture),)
    recent = data.recent_exchanges(source, data.signature(source), limit=3)
    assert recent.height == 3
    assert recent["ts"].is_sorted(descending=True)
    assert recent["method"][0] == "DELETE"
