"""clean-typescript: the TypeScript SDK server replays a dropped tool stream correctly."""

from __future__ import annotations

import re

import pytest

from tests.support.lab_capture import LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(360)]

# The SDK's example InMemoryEventStore: `<streamId>_<epoch-ms>_<random>`.
TS_EVENT_ID = re.compile(r"(?P<stream>[0-9a-f-]{36})_(?P<ms>\d{13})_(?P<rand>[0-9a-z]+)")


def _stream_of(event_id: str | None) -> str:
    matched = TS_EVENT_ID.fullmatch(event_id or "")
    assert matched is not None, f"not an InMemoryEventStore id: {event_id!r}"
    return matched.group("stream")


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-typescript")


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}


def test_every_post_stream_opens_with_a_priming_event(run: LabRun) -> None:
    posts = [f for f in run.flows if f.method == "POST" and f.status == 200]
    assert [f.rpc_method for f in posts] == ["initialize", "tools/list", "tools/call", "tools/call"]
    for flow in posts:
        first = flow.events[0]
        assert first.data == "" and _stream_of(first.id)


def test_tool_stream_is_dropped_after_progress_2(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    ids = [e.id for e in call.events]
    assert ids == run.notes["call_event_ids"] and len(ids) == 3
    assert len({_stream_of(i) for i in ids}) == 1  # every id encodes the stream
    assert [m["params"]["progress"] for m in call.messages] == [1, 2]
    assert call.end is not None and call.end["how"] == "client_closed"


def test_resume_replays_the_rest_of_the_stream_under_its_ids(run: LabRun) -> None:
    (call,) = run.calls("slow_report")
    (resume,) = [f for f in run.flows if f.method == "GET"]
    cursor = resume.request_header("last-event-id")
    assert cursor == call.events[-1].id == run.notes["resume_cursor"]
    assert resume.status == 200
    ids = [e.id for e in resume.events]
    assert ids == run.notes["replayed_event_ids"]
    assert all(e.data for e in resume.events)  # no priming event after the replay
    assert {_stream_of(i) for i in ids} == {_stream_of(cursor)}
    assert ids == sorted(ids) and not set(ids) & {e.id for e in call.events}
    progress = [m["params"]["progress"] for m in resume.messages if "method" in m]
    assert progress == [3, 4, 5]
    assert call.body is not None
    assert resume.messages[-1]["id"] == call.body["id"] and "result" in resume.messages[-1]
    assert resume.end is not None and resume.end["how"] == "client_closed"


def test_session_ends_with_delete(run: LabRun) -> None:
    deletes = [f for f in run.flows if f.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].status == 200
