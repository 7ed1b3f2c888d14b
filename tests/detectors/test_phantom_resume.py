"""phantom-resume: a resume answered 200 with anything but the replay that was due."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from analyzer.detectors.phantom_resume import DETECTOR
from tests.support.records import Capture, Cut, event, res
from tests.support.streams import Session, findings, note, prime, progress

U = ("6f1c0a52-3e9b-4c1d-9a57-0b2e8d4f6a11", "a3d9e6f0-7b21-4f8e-8c3a-5e0d1b9c2f47",
     "0c8e5b7a-9d14-4e2f-b6a1-3f7c9e2d8b50", "d27f4a13-6c5e-4b98-a0e1-8b3c7d9f1e62",
     "91b0e8d2-4a6f-4c37-9e15-2d8a6b4c0f73")  # fmt: skip
TS = "15ebf62e-07b4-4391-a83e-033ef8d202cf_17500000001{:02d}_k{}x9q"  # TypeScript SDK shape


def error(i: str) -> str:
    return event({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "gone"}}, id=i)


def run(build: Callable[[Capture], None]) -> list[dict[str, Any]]:
    return findings(build, DETECTOR.id, opened=True).to_dicts()


# --- must flag --------------------------------------------------------------------------------


def fresh_stream_under_the_old_cursor(c: Capture) -> None:
    s = Session(c, "rr-1")
    s.call(4, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e2", prime("e1"), note("e2", "opened"), end="client_closed", replica="b")


def only_a_new_priming_event(c: Capture) -> None:
    s = Session(c, "3f2b9c4e1d7a4e8b")
    s.call(7, prime(U[0]), progress(U[1], 1), progress(U[2], 2))
    s.resume(U[1], prime(U[3]))


def standalone_stream_answered_afresh(c: Capture) -> None:
    s = Session(c, "7q2dUm9xWk4")
    s.get(note(TS.format(1, 1), "a"), note(TS.format(2, 2), "b"))
    s.resume(TS.format(1, 1), note(TS.format(5, 3), "c"), end="client_closed")


def counter_continuation_ended_without_the_response(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(3, prime("e1"), note("e2", "step 1"), note("e3", "step 2"), end="complete")
    s.resume("e3", note("e4", "resync 1"), note("e5", "resync 2"))


def fresh_stream_further_along_the_counter(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(3, prime("1"), note("2", "step 1"), note("3", "step 2"), end="complete")
    s.resume("3", prime("7"), note("8", "opened"))


def tail_past_a_lagging_cursor_on_the_only_stream_with_ids(c: Capture) -> None:
    # `<stream>_<n>` or a session-wide counter: with one stream, the wire cannot tell.
    s = Session(c, "S1")
    s.get(prime("g_1"), note("g_2", "note 1"), note("g_3", "note 2"))
    s.resume("g_2", note("g_6", "note 5"), note("g_7", "note 6"))


def tail_on_a_prefix_the_other_stream_shares(c: Capture) -> None:  # a session-wide counter
    s = Session(c, "S1")
    s.call(2, prime("evt-1"), note("evt-2", "step 1"), event(res(2, content=[]), id="evt-3"),
           end="complete")  # fmt: skip
    s.get(prime("evt-4"), note("evt-5", "note 1"), note("evt-6", "note 2"))
    s.resume("evt-5", note("evt-9", "note 4"), note("evt-10", "note 5"))


def fresh_answer_with_an_event_without_id(c: Capture) -> None:
    s = Session(c, "S1")
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}
    s.call(4, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", note("n1", "opened"), event(log), end="client_closed", replica="b")


FLAGGED = {
    "fresh stream under the old cursor (replica b)": (
        fresh_stream_under_the_old_cursor, ["e2", "e3", "e4", "e1"], ["4"]),
    "only a new priming event": (only_a_new_priming_event, [U[1], U[2], U[3]], ["7"]),
    "standalone GET stream answered afresh": (
        standalone_stream_answered_afresh,
        [TS.format(1, 1), TS.format(2, 2), TS.format(5, 3)], []),
    # The response was owed and the server ended the answer without it: ids further along the
    # stream's counter do not make it a continuation (medium: no replica change is known).
    "counter continuation ended without the response": (
        counter_continuation_ended_without_the_response, ["e3", "e4", "e5"], ["3"]),
    "fresh stream further along the counter": (
        fresh_stream_further_along_the_counter, ["3", "7", "8"], ["3"]),
    "tail past a lagging cursor on the only stream with ids": (
        tail_past_a_lagging_cursor_on_the_only_stream_with_ids, ["g_2", "g_3", "g_6", "g_7"], []),
    "fresh answer with an event without id": (
        fresh_answer_with_an_event_without_id, ["e2", "e3", "n1"], ["4"]),
    "tail on a prefix the other stream shares": (
        tail_on_a_prefix_the_other_stream_shares, ["evt-5", "evt-6", "evt-9", "evt-10"], []),
}  # fmt: skip
MEDIUM = {"counter continuation ended without the response",
          "fresh stream further along the counter"}  # fmt: skip


@pytest.mark.parametrize(("build", "event_ids", "request_ids"), FLAGGED.values(),
                         ids=FLAGGED.keys())  # fmt: skip
def test_flags_a_resume_that_is_no_continuation(
    build: Callable[[Capture], None], event_ids: list[str], request_ids: list[str]
) -> None:
    found = run(build)
    assert len(found) == 1
    medium = build.__name__.replace("_", " ") in MEDIUM
    assert found[0]["severity"] == ("medium" if medium else "high")
    assert found[0]["event_ids"] == event_ids
    assert found[0]["request_ids"] == request_ids
    assert "What to change" in found[0]["detail"]


def test_detail_names_both_replicas() -> None:
    detail = run(fresh_stream_under_the_old_cursor)[0]["detail"]
    assert "issued by replica a" in detail and "answered 200 by replica b" in detail


# --- must not flag ----------------------------------------------------------------------------


def correct_replay_then_new_priming(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("17"), progress("18", 1), progress("19", 2))
    s.resume("18", progress("19", 2), event(res(2, content=[]), id="20"), prime("21"))


def partial_replay(c: Capture) -> None:  # causal-gap's to judge
    s = Session(c, "S1")
    s.call(2, prime(U[0]), progress(U[1], 1), progress(U[2], 2), progress(U[3], 3))
    s.resume(U[1], progress(U[2], 2), prime(U[4]))


def replay_under_fresh_ids(c: Capture) -> None:  # what was due came again, renumbered
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", progress("f3", 2), prime("f4"))


def answer_without_events(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2")


def cursor_refused_with_an_error(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", error("e9"))


def nothing_was_due(c: Capture) -> None:  # polling: the cursor was the last event
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), end="complete")
    s.resume("e2", progress("e3", 2), event(res(2, content=[]), id="e4"))


def counter_continuation_cut_short(c: Capture) -> None:  # it may have been on its way
    s = Session(c, "S1")
    s.call(3, prime("e1"), note("e2", "step 1"), note("e3", "step 2"), end="complete")
    s.resume("e3", note("e4", "step 3"), end="client_closed")


def surviving_tail_with_the_response(c: Capture) -> None:  # causal-gap's: S's own response
    s = Session(c, "S1")
    s.call(3, note(U[0], "step 1"), note(U[1], "step 2"))
    s.resume(U[0], note(U[3], "step 5"), event(res(3, content=[]), id=U[4]))


def tail_on_ids_naming_the_stream(c: Capture) -> None:  # causal-gap's: a replay with a gap
    s = Session(c, "S1")
    s.call(2, prime("p_1"), note("p_2", "step 1"), event(res(2, content=[]), id="p_3"),
           end="complete")  # fmt: skip
    s.get(prime("g_1"), note("g_2", "note 1"), note("g_3", "note 2"))
    s.resume("g_2", note("g_6", "note 5"), note("g_7", "note 6"))


def resume_answered_404(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", status=404)


CLEAN = {
    "correct replay, then a new priming event": correct_replay_then_new_priming,
    "partial replay": partial_replay,
    "replay under fresh ids": replay_under_fresh_ids,
    "answer without events": answer_without_events,
    "cursor refused with an error": cursor_refused_with_an_error,
    "nothing was due": nothing_was_due,
    "resume answered 404": resume_answered_404,
    "counter continuation cut short": counter_continuation_cut_short,
    "surviving tail with the response": surviving_tail_with_the_response,
    "tail on ids naming the stream (another stream has its own prefix)": (
        tail_on_ids_naming_the_stream
    ),
}


@pytest.mark.parametrize("build", CLEAN.values(), ids=CLEAN.keys())
def test_quiet_on_continuations(build: Callable[[Capture], None]) -> None:
    assert run(build) == []


# --- the shapes real servers take (tests/support/records.py `Cut`) ----------------------------


def _expected(cut: Cut) -> str | None:
    """What DESIGN.md §5 says of a resume answered as `cut.answer` says."""
    # A constant id resolves to its latest issue: nothing carried lies after it.
    events_due = cut.lost > 0 and cut.ids != "constant"
    # A replay that skips all that was due, then goes on with messages that show no tie to the
    # stream (no progress token it carried), is told from a fresh stream by nothing: a fresh
    # stream of a session-wide counter goes on past the cursor too.
    if cut.answer == "tail" and events_due and cut.progress == "none" and cut.lost <= 2:
        return "high"
    if cut.answer not in ("fresh", "other_payloads") or cut.era == "2026-07-28":
        return None
    if events_due:
        return "high"
    if not cut.owed:  # nothing was due: a GET stream going on with new messages
        return None
    moved = cut.replica and cut.answer == "fresh"  # replica b answered
    return "high" if moved else "medium"


SHAPES = [
    Cut(ids=ids, seen=seen, lost=lost, owed=owed, replica=replica, answer=answer, progress=p,
        chunking=chunking, era=era)
    for ids in ("padded", "uuid", "epoch_rand", "constant")
    for answer in ("fresh", "other_payloads", "replay", "tail", "empty", "404", "409",
                   "control", "control_data")
    for seen, lost, owed, replica, p, chunking, era in (
        (0, 0, True, True, "total", "one", "2025-11-25"),  # response owed, only priming seen
        (1, 1, True, False, "bare", "several", "2025-11-25"),  # events due, no replica header
        (2, 0, True, False, "none", "midline", "2025-06-18"),  # owed, no replica header
        (2, 2, False, True, "none", "one", "2025-03-26"),  # GET stream, events due
        (2, 0, False, True, "total", "gzip", "2025-11-25"),  # GET stream, nothing due
    )
]  # fmt: skip


@pytest.mark.parametrize("cut", SHAPES, ids=repr)
def test_a_resume_in_every_shape(cut: Cut) -> None:
    found = run(cut.build)
    expected = _expected(cut)
    assert [f["severity"] for f in found] == ([expected] if expected else [])


def test_an_owed_response_is_named_in_the_detail() -> None:
    (found,) = run(Cut(ids="uuid", seen=0, answer="fresh").build)
    assert "instead of the response to request 5 it still owed" in found["detail"]
    assert found["request_ids"] == ["5"]
