"""superseded-stream: a cursor of replaced GET stream 1 resumed while GET stream 2 is open."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("superseded-stream")


def _gets(run: LabRun) -> list[Flow]:
    return [f for f in run.flows if f.method == "GET"]


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["superseded-stream"]
    assert run.expected["evidence"] == {"event_ids": [run.notes["superseded_cursor"]]}


def test_stream_1_carried_two_events_and_was_closed_by_the_server(run: LabRun) -> None:
    stream1, _stream2, _resume = _gets(run)
    assert stream1.request_header("last-event-id") is None and stream1.status == 200
    assert [e.id for e in stream1.events] == run.notes["stream1_event_ids"]
    assert stream1.end is not None
    assert stream1.end["how"] in ("complete", "server_closed")
    (drop,) = run.calls("drop_standalone_stream")
    assert drop.request_ts < int(stream1.end["ts_ns"])


def test_stream_2_replaced_stream_1_without_a_cursor(run: LabRun) -> None:
    stream1, stream2, _resume = _gets(run)
    assert stream2.request_header("last-event-id") is None and stream2.status == 200
    assert stream1.end is not None and int(stream1.end["ts_ns"]) < stream2.request_ts
    assert [e.id for e in stream2.events] == run.notes["stream2_event_ids"]
    assert all(f.status != 409 for f in run.flows)


def test_old_cursor_resumed_while_stream_2_is_open(run: LabRun) -> None:
    stream1, stream2, resume = _gets(run)
    assert resume.request_header("last-event-id") == run.notes["superseded_cursor"]
    assert resume.request_header("last-event-id") == stream1.events[-1].id
    assert resume.status == 200
    assert stream2.end is not None and resume.request_ts < int(stream2.end["ts_ns"])
    assert resume.events == []  # the SDK replays nothing and ends the response
    session = run.notes["session"]
    assert {f.request_header("mcp-session-id") for f in _gets(run)} == {session}
