"""clean-concurrent: one session's tool streams side by side, three of them resumed."""

from __future__ import annotations

from itertools import pairwise

import pytest

from tests.support.lab_capture import Flow, LabRun, LabRuns, assert_well_formed

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("clean-concurrent")


def _progress(flow: Flow) -> list[float]:
    return [m["params"]["progress"] for m in flow.messages if "method" in m]


def test_capture_is_well_formed(run: LabRun) -> None:
    assert_well_formed(run)
    assert run.expected == {"required": [], "any_of": [], "allowed": [], "evidence": {}}
    sessions = {f.response_header("mcp-session-id") for f in run.flows if f.rpc_method}
    assert len(sessions - {None}) == 1


def test_tool_streams_ran_side_by_side_with_interleaved_event_ids(run: LabRun) -> None:
    reports = [f for f in run.calls("slow_report") if f.end is not None]
    assert len(reports) == run.notes["calls"] + run.notes["resumed"]
    first, second = reports[0], reports[1]
    assert first.end is not None and second.request_ts < int(first.end["ts_ns"])
    # One counter for every stream: a stream's ids skip the ids the others took meanwhile.
    ids = [[int(e.id or 0) for e in f.events] for f in reports]
    assert any(b - a > 1 for stream in ids for a, b in pairwise(stream))


def test_each_resume_replays_the_rest_of_its_own_stream_once(run: LabRun) -> None:
    closed = [
        f
        for f in run.calls("slow_report")
        if f.body and f.body["params"]["arguments"].get("close_after")
    ]
    assert len(closed) == run.notes["resumed"] == len(run.resumes)
    by_cursor = {f.request_header("last-event-id"): f for f in run.resumes}
    for call in closed:
        assert call.body is not None
        resume = by_cursor[call.events[-1].id]
        assert resume.status == 200 and resume.method == "GET"
        assert _progress(call) + _progress(resume) == [1, 2, 3]
        answers = [m for m in call.messages + resume.messages if "result" in m]
        assert [m["id"] for m in answers] == [call.body["id"]]
        own = {e.id for e in resume.events if e.data}
        others = {e.id for f in run.resumes if f.id != resume.id for e in f.events}
        assert own and not own & others


def test_every_call_is_answered_once(run: LabRun) -> None:
    answers = [m["id"] for f in run.flows for m in f.messages if "result" in m or "error" in m]
    calls = [
        f.body["id"]
        for f in run.flows
        if f.rpc_method in ("tools/call", "tools/list", "initialize") and f.body
    ]
    assert sorted(answers) == sorted(calls)
