"""shared-event-store: two sessions' resumes replay each other's events from one event store."""

from __future__ import annotations

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("shared-event-store")


def _session(flow: Flow) -> str | None:
    return flow.request_header("mcp-session-id")


def _tool_resumes(run: LabRun) -> list[Flow]:
    cursors = {c.events[-1].id for c in run.calls("slow_report")}
    return [r for r in run.resumes if r.request_header("last-event-id") in cursors]


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected["required"] == ["cross-session-replay"]
    assert run.expected["evidence"] == {"request_ids": ["3"]}


def test_two_sessions_each_call_request_3_and_the_server_closes_both_streams(run: LabRun) -> None:
    calls = run.calls("slow_report")
    assert len(calls) == 2 and len({_session(c) for c in calls}) == 2
    for call in calls:
        assert call.body is not None and call.body["id"] == 3
        assert not [m for m in call.messages if "result" in m]  # closed before its answer
    first, second = calls
    assert first.end is not None and second.request_ts < int(first.end["ts_ns"])


def test_tool_resumes_carry_their_own_cursors_and_one_gets_both_answers(run: LabRun) -> None:
    calls = {_session(c): c for c in run.calls("slow_report")}
    resumes = _tool_resumes(run)
    assert len(resumes) == 2
    for resume in resumes:
        assert resume.request_header("last-event-id") == calls[_session(resume)].events[-1].id
        assert resume.status == 200
    twice = [r for r in resumes if len([m for m in r.messages if "result" in m]) == 2]
    assert twice, "no resume answered request 3 twice"
    for resume in twice:
        answers = [e for e in resume.events if e.message and "result" in e.message]
        assert {e.message["id"] for e in answers if e.message} == {3}
        assert len({e.id for e in answers}) == 2
        (other,) = [r for r in resumes if r.id != resume.id]
        assert {e.id for e in resume.events if e.data} & {e.id for e in other.events if e.data}


def test_a_get_resume_replays_the_note_b_received_live(run: LabRun) -> None:
    note_for_b = run.notes["note_for_b"]
    gets = [f for f in run.flows if f.method == "GET" and not f.request_header("last-event-id")]
    (b_live,) = [
        e for f in gets for e in f.events if e.message and e.message["params"]["data"] == note_for_b
    ]
    (a_resume,) = [r for r in run.resumes if r not in _tool_resumes(run)]
    assert a_resume.status == 200
    replayed = [e for e in a_resume.events if e.message]
    assert [(e.id, e.message["params"]["data"]) for e in replayed if e.message] == [
        (b_live.id, note_for_b)
    ]
    b_session = {_session(f) for f in gets if b_live in f.events}
    assert _session(a_resume) not in b_session
    assert run.notes["notes_seen"]["a"][-1] == note_for_b  # A's client took it as its own
