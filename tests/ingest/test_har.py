"""analyzer.ingest.har: HAR 1.2 entries as capture records."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.ingest.common import UnreadableInput
from analyzer.ingest.har import read_har
from tests.support.examples import examples
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


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from analyzer import cli

    code = cli.main(["analyze", "--no-cache", "--format", "json", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"log": []}', "log is an array, not an object"),
        ('{"log": "x"}', "log is a string, not an object"),
        ('{"log": {"entries": {}}}', "log.entries is an object, not an array"),
        ('{"log": {"entries": null}}', "log.entries is null, not an array"),
        ('{"nolog": 1}', "no log.entries: no log"),
        ("[1, 2]", "the file holds an array, not an object"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_har_of_the_wrong_structure_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, reason: str
) -> None:
    path = tmp_path / "x.har"
    path.write_text(text)
    with pytest.raises(UnreadableInput, match=f"x.har: not a HAR file .*{reason}"):
        read_har(path, tmp_path)
    code, out, err = _analyze(path, capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "x.har: not a HAR file" in err and reason in err


def test_numbers_past_their_range_make_the_entry_malformed(tmp_path: Path) -> None:
    bad = [
        _entry(1, time=float("inf")),  # what JSON's 1e400 reads as
        _entry(2, time=10**400),  # an integer past the float range
        _entry(3, time=1e300),  # finite, but ends past the ns range
        _entry(4, startedDateTime="9999-12-31T00:00:00Z"),  # past the ns range
        _entry(5, startedDateTime=1750000000),  # no ISO 8601 text
        _entry(6, response={**_entry(0)["response"], "status": 10**30}),
        _entry(7, timings={"wait": 1e300}),  # the response time past the ns range
        "not an entry",
    ]
    report, tables = _read(tmp_path, [_entry(0), *bad])
    assert report.counts == {"har_bad_entry": len(bad)}
    assert report.skipped == len(bad)
    assert tables["flows"]["req_ts"].dt.epoch("ms").to_list() == [1750000000000]


def test_times_that_are_no_finite_numbers_are_absent(tmp_path: Path) -> None:
    # Like a time that is no number at all: a timing phase does not apply, a message is
    # timed at the end of its entry.
    messages = [
        {"time": 1750000000.5, "eventId": "1", "data": "{}"},
        {"time": float("inf"), "eventId": "2", "data": "{}"},
        {"time": 10**400, "eventId": "3", "data": "{}"},
        {"time": 1e300, "eventId": "4", "data": "{}"},  # finite, past the ns range
    ]
    entry = _entry(0, timings={"wait": float("inf"), "send": 10**400, "dns": 2})
    entry["_eventSourceMessages"] = messages
    report, tables = _read(tmp_path, [entry])
    assert report.counts == {}
    started = 1750000000000  # ms: 2025-06-15T15:06:40Z
    assert tables["flows"]["resp_ts"].dt.epoch("ms").to_list() == [started + 2]  # dns only
    assert tables["events"]["ts"].dt.epoch("ms").to_list() == [
        1750000000500,
        started + 100,
        started + 100,
        started + 100,
    ]


def test_a_har_with_infinite_numbers_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _entry(1)
    entry["_eventSourceMessages"] = [{"time": "INF", "eventId": "1", "data": "{}"}]
    text = json.dumps({"log": {"entries": [_entry(0, time="INF"), entry]}})
    path = tmp_path / "x.har"
    path.write_text(text.replace('"INF"', "1e400"))
    code, out, err = _analyze(path, capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["inputs"][0]["warnings"] == ["1 HAR entry(ies) skipped (malformed)"]
    assert report["summary"]["by_detector"]["capture-health"] == 1


def test_lone_surrogates_skip_the_entry_and_payloads_are_kept(tmp_path: Path) -> None:
    # Names (method, URL, headers, error) with a lone surrogate make the entry malformed; a
    # body or an event's data is payload, recorded as the bytes it stands for.
    named = [
        _entry(1, request={**_entry(0)["request"], "method": "PO\udc00ST"}),
        _entry(2, request={**_entry(0)["request"], "url": "http://mcp.test/m\udc00"}),
        _entry(3, _error="net::\udc00"),
    ]
    named[2]["response"]["status"] = 0
    post = _entry(4, request={**_entry(0)["request"], "postData": {"text": '{"a":"\udc00"}'}})
    data = _entry(5, _eventSourceMessages=[{"time": 1750000000.5, "data": "x\udc00"}])
    report, tables = _read(tmp_path, [_entry(0), *named, post, data])
    assert report.counts == {"har_bad_entry": 3}
    flows = tables["flows"].sort("req_ts")
    assert flows.height == 3 and flows["request_body_hash"].null_count() == 2
    assert tables["events"].height == 3


def test_an_empty_har_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report, _ = _read(tmp_path, [])
    assert report.counts == {"empty_input": 1}
    assert report.warnings == ("1 input(s) without any HTTP flow (empty)",)
    code, out, _ = _analyze(tmp_path / "x.har", capsys)
    assert code == 0
    assert json.loads(out)["inputs"][0]["warnings"] == list(report.warnings)


# --- fuzz: no exception but the documented one (UnreadableInput) ------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = (
    "startedDateTime", "time", "request", "response", "method", "url", "headers", "name",
    "value", "status", "content", "text", "mimeType", "encoding", "_webSocketMessages",
    "_eventSourceMessages", "timings", "serverIPAddress", "cookies",
)  # fmt: skip


def _mutated_entry(entry: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """A real entry with some of its fields, at any depth, replaced by arbitrary JSON."""
    mutated: Any = json.loads(json.dumps(entry))
    for _ in range(data.draw(st.integers(0, 4))):
        node = mutated
        while isinstance(node, dict) and node and data.draw(st.booleans()):
            child = node[data.draw(st.sampled_from(sorted(node)))]
            if not isinstance(child, dict):
                break
            node = child
        if isinstance(node, dict):
            node[data.draw(st.sampled_from(_FIELDS))] = data.draw(_JSON)
    return dict(mutated) if isinstance(mutated, dict) else {}


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_fuzz_har_reader_raises_nothing_undocumented(tmp_path: Path, data: st.DataObject) -> None:
    choice = data.draw(st.sampled_from(["bytes", "json", "entries"]))
    if choice == "bytes":
        raw = data.draw(st.binary(max_size=200))
    elif choice == "json":
        raw = json.dumps(data.draw(_JSON)).encode()
    else:
        entries = [
            _mutated_entry(_entry(i % 10), data) for i in range(data.draw(st.integers(0, 3)))
        ]
        raw = json.dumps({"log": {"version": "1.2", "entries": entries}}).encode()
    path = tmp_path / "fuzz.har"
    path.write_bytes(raw)
    out = tmp_path / "fuzz-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    with contextlib.suppress(UnreadableInput):  # documented: exit 2 in one line
        read_har(path, out)
