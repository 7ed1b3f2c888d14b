"""analyzer.ingest.har: HAR 1.2 entries as capture records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer.ingest.common import UnreadableInput
from analyzer.ingest.har import read_har
from tests.support.progress import assert_half_then_whole, read_with_progress


def _entry(i: int, **over: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "startedDateTime": f"2025-06-15T15:06:4{i}.000Z",
        "time": 100,
        "request": {
            "method": "GET",
            "url": "http://mcp.test/mcp?sessionId=L1",
            "headers": [{"name": "Mcp-Session-Id", "value": "S1"}],
        },
        "response": {
            "status": 200,
            "headers": [{"name": "Content-Type", "value": "text/event-stream"}],
            "content": {"mimeType": "text/event-stream", "text": "id: 1\ndata: {}\n\n"},
        },
    }
    entry.update(over)
    return entry


def _read(tmp_path: Path, entries: list[Any]) -> tuple[Any, dict[str, pl.DataFrame]]:
    path = tmp_path / "x.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    out = tmp_path / "out"
    out.mkdir()
    report = read_har(path, out)
    tables = {
        t: pl.read_parquet(sorted(out.glob(f"{t}-*.parquet")))
        for t in ("flows", "events")
        if list(out.glob(f"{t}-*.parquet"))
    }
    return report, tables


def test_content_text_is_the_event_stream(tmp_path: Path) -> None:
    report, tables = _read(tmp_path, [_entry(0)])
    assert report.kind == "har" and report.counts == {}
    flow = tables["flows"].row(0, named=True)
    assert (flow["path"], flow["query"], flow["mcp_session_id"]) == ("/mcp", "sessionId=L1", "S1")
    assert (flow["client_ip"], flow["status"], flow["end_how"]) == ("har", 200, "complete")
    assert tables["events"]["event_id"].to_list() == ["1"]


def test_event_source_messages_give_timed_events(tmp_path: Path) -> None:
    messages = [
        {"time": 1750000000.5, "eventName": "message", "eventId": "7", "data": '{"a":1}'},
        {"time": 1750000001.5, "eventName": "message", "eventId": "7", "data": '{"a":2}'},
        {"time": 1750000002.5, "eventName": "endpoint", "eventId": "8", "data": "/m?x=1"},
    ]
    _, tables = _read(tmp_path, [_entry(0, _eventSourceMessages=messages)])
    events = tables["events"]
    # eventId is the EventSource's last event ID: an id line only where it changes.
    assert events["event_id"].to_list() == ["7", None, "8"]
    assert events["last_event_id"].to_list() == ["7", "7", "8"]
    assert events["event"].to_list() == ["message", "message", "endpoint"]
    assert events["ts"].dt.epoch("ms").to_list() == [1750000000500, 1750000001500, 1750000002500]


def test_failed_entries_and_missing_text(tmp_path: Path) -> None:
    failed = _entry(
        1, response={"status": 0, "headers": [], "content": {}}, _error="net::ERR_ABORTED"
    )
    empty = _entry(2)
    empty["response"]["content"] = {"mimeType": "text/event-stream"}
    report, tables = _read(tmp_path, [_entry(0), failed, empty, {"startedDateTime": "bad"}])
    assert report.counts == {"har_bad_entry": 1, "har_missing_text": 1}
    flows = tables["flows"].sort("req_ts")
    assert flows["status"].to_list() == [200, None, 200]
    assert flows["end_how"].to_list() == ["complete", "error", "complete"]
    assert flows["end_error"].to_list()[1] == "net::ERR_ABORTED"


def test_not_a_har_file(tmp_path: Path) -> None:
    (tmp_path / "x.har").write_text("[1, 2]")
    with pytest.raises(UnreadableInput, match=r"no log\.entries"):
        read_har(tmp_path / "x.har", tmp_path)
    (tmp_path / "y.har").write_text("{nope")
    with pytest.raises(UnreadableInput, match="not a HAR file"):
        read_har(tmp_path / "y.har", tmp_path)


def test_progress_follows_the_file_to_its_end(tmp_path: Path) -> None:
    # The JSON is loaded whole (half the bar), then converted entry by entry.
    path = tmp_path / "x.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [_entry(0), _entry(1)]}}))
    calls = read_with_progress(read_har, path, tmp_path / "out")
    assert_half_then_whole(calls, path.stat().st_size)
