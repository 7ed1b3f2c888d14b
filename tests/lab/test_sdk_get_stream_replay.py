"""sdk-get-stream-replay: stream 1's cursor resumed after stream 2 ended; stream 2's event comes."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("sdk-get-stream-replay")


def _gets(run: LabRun) -> list[Flow]:
    return [f for f in run.flows if f.method == "GET"]


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["cross-stream-replay", "superseded-stream"]
    cursor, replayed = run.notes["resumed_cursor"], run.notes["stream2_event_ids"][0]
    assert run.expected["evidence"] == {"event_ids": [cursor, replayed]}


def test_each_get_stream_carried_one_announcement_and_was_closed_by_the_server(
    run: LabRun,
) -> None:
    stream1, stream2, _resume = _gets(run)
    drops = run.calls("drop_standalone_stream")
    assert len(drops) == 2
    for stream, drop, key in zip(
        (stream1, stream2), drops, ("stream1_event_ids", "stream2_event_ids"), strict=True
    ):
        assert stream.request_header("last-event-id") is None and stream.status == 200
        assert [e.id for e in stream.events] == run.notes[key]
        assert [m["method"] for m in stream.messages] == ["notifications/message"]
        assert stream.end is not None and stream.end["how"] in ("complete", "server_closed")
        assert drop.request_ts < int(stream.end["ts_ns"])
    assert stream1.end is not None and int(stream1.end["ts_ns"]) < stream2.request_ts


def test_resume_of_stream_1_replays_stream_2s_event(run: LabRun) -> None:
    stream1, stream2, resume = _gets(run)
    assert stream2.end is not None and int(stream2.end["ts_ns"]) < resume.request_ts
    assert resume.request_header("last-event-id") == stream1.events[-1].id
    assert resume.status == 200
    replayed, priming = resume.events
    # The very event stream 2 carried, same id and payload, now on stream 1's incarnation.
    assert (replayed.id, replayed.data) == (stream2.events[0].id, stream2.events[0].data)
    assert priming.message is None and priming.id == run.notes["resume_event_ids"][-1]
    assert run.notes["store_replays"] == [
        {"cursor": stream1.events[-1].id, "replayed": [replayed.id], "stream_id": "_GET_stream"}
    ]
    session = run.notes["session"]
    assert {f.request_header("mcp-session-id") for f in _gets(run)} == {session}
