"""Every dashboard page under `AppTest` on the stored lab capture: no exception, the numbers.

The expected numbers come from the capture itself (48 records, one session, two logical streams,
one resumption, two tool calls) and the findings from the analyzer run on it: the dashboard
must show exactly what `run_detectors` finds, whichever detectors are registered today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from analyzer.analysis import read_timeline
from analyzer.detectors import run_detectors
from dashboards import data
from tests.dashboards.conftest import make_app
from tests.support.planted import ACTING, SPOOF_ID, spoofing_capture
from tests.support.records import Capture, event, req, res, sse

pytestmark = pytest.mark.usefixtures("fresh_caches")

FINDINGS_PAGE = "app_pages/findings.py"
TIMELINE_PAGE = "app_pages/timeline.py"
LIVE_PAGE = "app_pages/live.py"


def analyzer_findings(path: Path) -> pl.DataFrame:
    return run_detectors(read_timeline([path]))


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def texts(at: AppTest) -> str:
    return "\n".join(t.value for t in at.text)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def run_page(at: AppTest, page: str | None = None) -> AppTest:
    at.run()
    if page is not None:
        at.switch_page(page).run()
    return at


def test_overview_shows_capture_health_counts_and_findings(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path, expected: dict[str, Any]
) -> None:
    at = run_page(make_app(monkeypatch, lab_capture))
    no_exception(at)
    shown = metrics(at)
    assert {k: shown[k] for k in ("Records read", "Lines skipped", "Records lost")} == {
        "Records read": "48",
        "Lines skipped": "0",
        "Records lost": "0",
    }
    assert {k: shown[k] for k in ("Sessions", "Streams", "Resumptions", "Tool calls")} == {
        "Sessions": "1",
        "Streams": "2",
        "Resumptions": "1",
        "Tool calls": "2",
    }
    found = analyzer_findings(lab_capture)
    assert shown["Findings"] == str(found.height)
    for level in ("high", "medium", "low", "info"):
        count = found.filter(pl.col("severity") == level).height
        assert shown[level.capitalize()] == str(count)
    by_detector = next(df for df in at.dataframe if "detector" in df.value.columns)
    assert sorted(by_detector.value["detector"]) == sorted(found["detector"].unique())
    assert expected["required"], "the stored lab capture has required detectors"
    assert set(expected["required"]) <= set(by_detector.value["detector"])
    assert "Read cleanly" in at.success[0].value


def test_findings_table_and_first_finding_detail(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path
) -> None:
    at = run_page(make_app(monkeypatch, lab_capture), FINDINGS_PAGE)
    no_exception(at)
    found = analyzer_findings(lab_capture)
    assert found.height, "the lab capture has findings"
    assert f"{found.height} of {found.height} findings" in texts(at)
    table = next(df for df in at.dataframe if "title" in df.value.columns)
    assert list(table.value["detector"]) == found["detector"].to_list()
    assert list(table.value["title"]) == found["title"].to_list()
    # Nothing selected: the first (worst) finding's detail is shown.
    first = found.row(0, named=True)
    assert at.subheader[0].value == first["detector"]
    assert first["title"] in texts(at)
    assert first["detail"] in texts(at)


def test_findings_filter_by_detector(monkeypatch: pytest.MonkeyPatch, lab_capture: Path) -> None:
    at = run_page(make_app(monkeypatch, lab_capture), FINDINGS_PAGE)
    found = analyzer_findings(lab_capture)
    at.multiselect(key="f_detector").set_value(["repeated-tool-call"]).run()
    no_exception(at)
    count = found.filter(pl.col("detector") == "repeated-tool-call").height
    assert f"{count} of {found.height} findings" in texts(at)


def finding_page(monkeypatch: pytest.MonkeyPatch, path: Path, detector: str) -> AppTest:
    found = analyzer_findings(path)
    rows = found.filter(pl.col("detector") == detector)
    assert rows.height, f"{detector} finds nothing on {path}"
    at = make_app(monkeypatch, path)
    at.run()
    at.query_params["finding"] = rows["fingerprint"][0]
    at.switch_page(FINDINGS_PAGE).run()
    no_exception(at)
    assert at.subheader[0].value == detector
    return at


def test_duplicate_event_id_shows_both_payloads_side_by_side(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path
) -> None:
    at = finding_page(monkeypatch, lab_capture, "duplicate-event-id")
    assert "The payloads issued under one id, side by side" in [s.value for s in at.subheader]
    assert "event id e2: 2 issue(s), 2 payload(s)" in texts(at)
    payloads = [json.loads(c.value) for c in at.code if c.language == "json"]
    methods = {p.get("method") for p in payloads}
    # replica-a sent a progress notification as e2, replica-b a log message under the same id
    assert {"notifications/progress", "notifications/message"} <= methods


def test_repeated_tool_call_shows_both_calls_and_what_happened_between(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path
) -> None:
    at = finding_page(monkeypatch, lab_capture, "repeated-tool-call")
    heads = [s.value for s in at.subheader]
    assert "The calls" in heads
    assert "What happened between the calls" in heads
    requests = [json.loads(c.value) for c in at.code if c.language == "json"]
    calls = [r for r in requests if r.get("method") == "tools/call"]
    assert sorted(r["id"] for r in calls) == [4, 5]
    assert all(r["params"]["name"] == "create_ticket" for r in calls)
    between = next(df for df in at.dataframe if "what" in df.value.columns).value
    whats = list(between["what"])
    assert whats[0] == "request POST → 200"  # the first call
    assert "stream end: client_closed" in whats  # its stream broke
    assert "request GET → 200" in whats  # the resume on replica-b
    assert whats[-1] == "request POST → 200"  # the same call again


def test_session_timeline_draws_lanes_and_highlights(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path
) -> None:
    at = run_page(make_app(monkeypatch, lab_capture), TIMELINE_PAGE)
    no_exception(at)
    assert at.selectbox(key="t_session").value == "mcp:rr-1"
    shown = metrics(at)
    assert {k: shown[k] for k in ("Streams", "Incarnations", "Resumptions", "Tool calls")} == {
        "Streams": "2",
        "Incarnations": "3",
        "Resumptions": "1",
        "Tool calls": "2",
    }
    assert shown["SSE events"] == "21"
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    lanes = spec["layer"][0]["encoding"]["y"]["sort"]
    assert lanes == [
        "S1 POST tools/call id 4 · replica-a → replica-b",
        "S2 POST tools/call id 5 · replica-a",
        "no stream (JSON, 202, DELETE…)",
    ]
    assert {p["name"] for p in spec["params"]} == {"zoom", "pick"}
    # The payload shown by default is the first mark a finding names.
    assert "named by:" in texts(at)
    assert at.code[0].value


def test_session_timeline_time_spacing(monkeypatch: pytest.MonkeyPatch, lab_capture: Path) -> None:
    at = run_page(make_app(monkeypatch, lab_capture), TIMELINE_PAGE)
    at.button_group(key="spacing").set_value("time").run()
    no_exception(at)
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["layer"][0]["encoding"]["x"]["field"] == "t_ms"


def _live_capture(tmp_path: Path) -> tuple[Path, Path, Capture, str]:
    """A proxy's capture folder with its `.partial` file so far: a tools/call whose SSE stream
    has sent one event (id a1). Returns the folder, the file, the records and the call's flow."""
    capture = tmp_path / "live"
    capture.mkdir()
    partial = capture / "capture-live-0000.jsonl.partial"
    c = Capture("live-run").open()
    call = c.request(body=req("tools/call", 1, name="t", arguments={}), headers={"X": "1"})
    c.response(call, sse=True)
    c.chunk(call, sse(event({"n": 1}, id="a1")), n=0)
    c.write(partial)
    return capture, partial, c, call


def test_live_reads_new_records_without_restart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Records appended between two runs of the page show up; only the new bytes are read."""
    capture, partial, c, call = _live_capture(tmp_path)
    at = make_app(monkeypatch, capture)
    at.run()
    at.switch_page(LIVE_PAGE).run()
    no_exception(at)
    shown = metrics(at)
    assert (shown["Records read"], shown["Sessions"], shown["Streams"]) == (
        str(len(c.records)),
        "1",
        "1",
    )
    assert f"{partial.stat().st_size:,} new bytes read, {len(c.records)} records" in texts(at)
    assert "being written" in list(at.dataframe[0].value["state"])
    # The open stream's exchange is listed while it runs, with its event so far.
    assert at.dataframe[1].value["events"].to_list() == [1]

    # The proxy appends: the stream delivers its response and a second session starts.
    before = partial.stat().st_size
    c.chunk(call, sse(event(res(1), id="a2")), n=1)
    c.end(call)
    c.request(body=req("ping", 2), headers={"mcp-session-id": "S2"})
    c.write(partial)
    at.button(key="l_refresh").click().run()
    no_exception(at)
    shown = metrics(at)
    # A second session (its POST still unanswered: no stream of its own yet).
    assert (shown["Records read"], shown["Sessions"], shown["Streams"]) == (
        str(len(c.records)),
        "2",
        "1",
    )
    assert f"{partial.stat().st_size - before:,} new bytes read, 3 records" in texts(at)
    assert sorted(at.dataframe[1].value["events"].to_list()) == [0, 2]

    # Nothing new: nothing read.
    at.button(key="l_refresh").click().run()
    assert "no new bytes" in texts(at)
    assert metrics(at)["Records read"] == str(len(c.records))

    # Rotation: the proxy renames the file; the reader follows without reading it again.
    partial.rename(capture / "capture-live-0000.jsonl")
    at.button(key="l_refresh").click().run()
    no_exception(at)
    assert metrics(at)["Records read"] == str(len(c.records))
    assert "no new bytes" in texts(at)
    assert list(at.dataframe[0].value["state"]) == ["closed"]


def test_live_runs_the_detectors_at_most_every_few_seconds_while_the_capture_grows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """New records are read at every refresh; the detectors wait for their interval, and the
    page says how old the findings it shows are until they run again."""
    capture, partial, c, call = _live_capture(tmp_path)
    monkeypatch.setattr(data, "LIVE_DETECT_EVERY_S", 3600.0)
    at = make_app(monkeypatch, capture)
    at.run()
    at.switch_page(LIVE_PAGE).run()
    no_exception(at)
    first = metrics(at)["Findings"]  # of the open stream so far (e.g. no response yet)
    assert "duplicate-event-id" not in list(at.dataframe[2].value["detector"])
    assert "Findings as of" not in texts(at)

    # The stream sends another payload under the same id: a duplicate-event-id finding, once
    # the detectors run again.
    c.chunk(call, sse(event({"n": 2}, id="a1")), n=1)
    c.write(partial)
    assert (
        not analyzer_findings(capture).filter(pl.col("detector") == "duplicate-event-id").is_empty()
    )
    at.button(key="l_refresh").click().run()
    no_exception(at)
    assert metrics(at)["Records read"] == str(len(c.records))  # the new record is read...
    assert metrics(at)["Findings"] == first  # ...the findings are those of the first run
    assert "duplicate-event-id" not in list(at.dataframe[2].value["detector"])
    assert "Findings as of" in texts(at) and "1 records ago" in texts(at)

    monkeypatch.setattr(data, "LIVE_DETECT_EVERY_S", 0.0)
    monkeypatch.setattr(data, "LIVE_DETECT_FACTOR", 0.0)
    at.button(key="l_refresh").click().run()
    no_exception(at)
    assert "duplicate-event-id" in list(at.dataframe[2].value["detector"])
    assert "Findings as of" not in texts(at)


def test_live_waits_for_capture_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = make_app(monkeypatch, tmp_path)
    at.run()
    assert not at.exception
    assert at.warning, "the overview says there is nothing to read"
    at.switch_page(LIVE_PAGE).run()
    assert not at.exception
    assert "Nothing to read yet:" in [w.value for w in at.warning]


@pytest.mark.parametrize("page", [None, FINDINGS_PAGE, TIMELINE_PAGE, LIVE_PAGE])
def test_every_page_without_input(monkeypatch: pytest.MonkeyPatch, page: str | None) -> None:
    at = run_page(make_app(monkeypatch, None), page)
    assert not at.exception
    assert at.info, "a page without input says how to start the dashboard"


@pytest.mark.parametrize("page", [None, FINDINGS_PAGE, TIMELINE_PAGE, LIVE_PAGE])
def test_every_page_on_the_planted_capture(
    monkeypatch: pytest.MonkeyPatch, planted: Path, page: str | None
) -> None:
    at = run_page(make_app(monkeypatch, planted), page)
    no_exception(at)
    # Wire text reaches the page only through inert elements, verbatim.
    shown = texts(at) + "\n".join(c.value for c in at.code)
    if page in (FINDINGS_PAGE, TIMELINE_PAGE):
        assert '<img src=x onerror="window.pwned=1">' in shown
    for element in ("markdown", "caption", "title", "header", "subheader", "info", "warning"):
        for node in at.get(element):
            assert "onerror" not in node.value and "planted.png" not in node.value


def test_a_long_session_is_drawn_in_windows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c = Capture("long-run").open()
    call = c.request(body=req("tools/call", 1, name="t", arguments={}), headers={"X": "1"})
    c.response(call, sse=True)
    blocks = [event({"n": k}, id=f"x{k}") for k in range(4100)]
    for n, start in enumerate(range(0, len(blocks), 500)):
        c.chunk(call, sse(*blocks[start : start + 500]), n=n)
    c.end(call)
    c.close()
    capture = tmp_path / "long"
    capture.mkdir()
    c.write(capture / "capture-long-0000.jsonl")
    at = run_page(make_app(monkeypatch, capture), TIMELINE_PAGE)
    no_exception(at)
    window = at.slider(key="t_window")
    low, high = window.value
    assert high - low == 4000  # MAX_POINTS of the timeline page
    (chart,) = at.get("vega_lite_chart")
    assert chart.proto.spec


def _shown_strings(at: AppTest) -> list[str]:
    """Every string the page shows: texts, code, JSON views, option labels, table cells."""
    shown = [t.value for t in at.text] + [c.value for c in at.code] + [j.value for j in at.json]
    for box in [*at.selectbox, *at.multiselect]:
        shown += [str(o) for o in box.options]
    for frame in at.dataframe:
        shown += [str(v) for column in frame.value.columns for v in frame.value[column]]
    return shown


@pytest.mark.parametrize("page", [None, FINDINGS_PAGE, TIMELINE_PAGE, LIVE_PAGE])
def test_controls_and_bidi_overrides_in_wire_text_are_shown_as_replacement_characters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, page: str | None
) -> None:
    capture = spoofing_capture(tmp_path / "spoof")
    found = analyzer_findings(capture).filter(pl.col("detector") == "duplicate-event-id")
    assert list(found["event_ids"][0]) == [SPOOF_ID]  # the analyzer keeps the id as sent
    at = make_app(monkeypatch, capture)
    at.run()
    if page is not None:
        at.query_params["finding"] = found["fingerprint"][0]
        at.switch_page(page).run()
    no_exception(at)
    shown = _shown_strings(at)
    assert [s for s in shown if any(c in s for c in ACTING)] == []
    assert any("s\ufffdtxt.exe" in s for s in shown)  # the session id, made visible
    if page == FINDINGS_PAGE:
        assert "event id e1\ufffdtxt.exe\ufffd[2J: 2 issue(s), 2 payload(s)" in texts(at)
        # a JSON payload shows the character as its escape, a plain one as U+FFFD
        assert any("ok \\u202egnp.exe \\u001b]0;pwned\\u0007" in c.value for c in at.code)
        assert any("plain \ufffdtext\ufffd31m" in c.value for c in at.code)


def test_several_inputs_are_shown_merged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lab_capture: Path
) -> None:
    other = spoofing_capture(tmp_path / "other")
    at = run_page(make_app(monkeypatch, lab_capture, other))
    no_exception(at)
    merged = read_timeline([lab_capture, other])
    assert f"Input: {lab_capture} + {other} (2 inputs, merged)" in texts(at)
    assert metrics(at)["Records read"] == str(sum(r.records for r in merged.inputs))
    assert metrics(at)["Sessions"] == "2"  # one in each capture
    expected = run_detectors(merged)
    assert metrics(at)["Findings"] == str(expected.height)
    at.switch_page(FINDINGS_PAGE).run()
    no_exception(at)
    assert at.text[0].value == f"{expected.height} of {expected.height} findings"
    at.switch_page(LIVE_PAGE).run()
    assert not at.exception
    assert "The Live page follows one input" in at.info[0].value


def test_the_picked_finding_stays_picked_when_the_filters_change(
    monkeypatch: pytest.MonkeyPatch, lab_capture: Path
) -> None:
    at = run_page(make_app(monkeypatch, lab_capture), FINDINGS_PAGE)
    table = at.dataframe[0]
    detectors, titles = list(table.value["detector"]), list(table.value["title"])
    assert len(detectors) >= 4 and detectors[0] not in detectors[1:]
    at.session_state[table.key] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert at.subheader[0].value == detectors[2]
    # Leave out the first row's detector: the picked finding moves up to row 1, and row 2 now
    # holds another finding, which a kept row number would show.
    at.multiselect(key="f_detector").set_value(sorted(set(detectors) - {detectors[0]})).run()
    no_exception(at)
    assert list(at.dataframe[0].value["title"])[2] != titles[2]
    assert at.subheader[0].value == detectors[2]
    assert titles[2] in texts(at)
    # A filter that hides it: the first finding shown.
    others = sorted(set(detectors) - {detectors[2]})
    at.multiselect(key="f_detector").set_value(others).run()
    no_exception(at)
    assert at.subheader[0].value == at.dataframe[0].value["detector"][0]


@pytest.mark.parametrize("page", [None, FINDINGS_PAGE, TIMELINE_PAGE])
def test_an_unreadable_dump_is_one_line_on_every_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, page: str | None
) -> None:
    dump = tmp_path / "x.mitm"
    dump.write_bytes(b"99999999999:")  # a 100 GB length prefix: was a MemoryError
    at = run_page(make_app(monkeypatch, dump), page)
    assert not at.exception, [e.value for e in at.exception]
    assert [w.value for w in at.warning] == [
        "The input has nothing to read yet (or cannot be read):"
    ]
    said = f"{dump}: not a mitmproxy dump (a frame of 99999999999 bytes where 12 remain at byte 0)"
    assert said in [t.value for t in at.text]


def test_the_session_list_names_the_origin_only_where_there_are_several(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lab_capture: Path
) -> None:
    c = Capture().open()
    for origin in ("http://127.0.0.1:9001", "https://mcp.b.test:443"):
        f = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"), origin=origin)
        c.response(f, body=res(0), headers={"Mcp-Session-Id": "1"})
    (tmp_path / "forward").mkdir()
    forward = c.close().write(tmp_path / "forward" / "capture-f-0000.jsonl")
    for path, origins in ((forward, ["http://127.0.0.1:9001", "https://mcp.b.test:443"]),
                          (lab_capture, None)):  # fmt: skip
        at = run_page(make_app(monkeypatch, path))
        no_exception(at)
        (listed,) = [df.value for df in at.dataframe if "session_id" in df.value.columns]
        shown = list(listed["origin"]) if "origin" in listed.columns else None
        assert shown == origins
