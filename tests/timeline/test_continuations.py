"""What a resume's answer did with what was due after its cursor (analyzer/timeline/
continuations.py; the finding it makes is judged in tests/detectors/test_phantom_resume.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from analyzer.timeline import continuations
from tests.support.records import Capture, event, timeline_of
from tests.support.streams import Session, note, prime, progress

Build = Callable[[Capture], None]


def judged(build: Build) -> dict[str, Any]:
    """Each function's answer for the capture's resumes, as the detector chains them."""
    c = Capture().open()
    build(c)
    tl = timeline_of(c)
    resumes = tl.resumes_at_cursor
    due = continuations.due(tl, resumes)
    answer = continuations.answers(tl, resumes)
    unmet = continuations.unmet(tl, resumes, answer, due).collect()
    continued = continuations.continued(tl, resumes, answer, due).collect()
    return {
        "unmet": unmet.select("due", "owed").rows(),
        "continued": continued.select("by_token", "by_counter").rows(),
        "told": continuations.told(tl, answer).collect().height,
        "sent": continuations.sent(answer, resumes).select("sent", "payloads").collect().rows(),
    }


def fresh_answer(c: Capture) -> None:
    s = Session(c, "rr-1")
    s.call(4, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e2", prime("e1"), note("e2", "opened"), end="client_closed", replica="b")


def replay_under_fresh_ids(c: Capture) -> None:  # what was due came again, renumbered
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", progress("f3", 2), prime("f4"))


def only_the_response_due(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(3, prime("e1"), note("e2", "step 1"), note("e3", "step 2"), end="complete")
    s.resume("e3", note("e4", "resync 1"), end="client_closed")


def partial_replay_of_a_token(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("a"), progress("b", 1), progress("c", 2), progress("d", 3))
    s.resume("b", progress("x", 3))


def refused_with_an_error(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", event({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}}))


def told_by_event_type(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", event({"stream": "fresh"}, id="n1", event="stream-reset"))


def told_by_data(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(2, prime("e1"), progress("e2", 1), progress("e3", 2))
    s.resume("e2", event({"resumed": False}, id="n1"))


CASES: dict[str, tuple[Build, dict[str, Any]]] = {
    "a fresh answer: due unmet, nothing continued or told": (fresh_answer, {
        "unmet": [(["e3", "e4"], False)], "continued": [], "told": 0,
        "sent": [(["e1", "e2"], 1)]}),
    "a replay under fresh ids meets what was due": (replay_under_fresh_ids, {
        "unmet": [], "continued": [(True, False)], "told": 0, "sent": [(["f3", "f4"], 1)]}),
    "only the response due, the counter going on": (only_the_response_due, {
        "unmet": [([], True)], "continued": [(False, True)], "told": 0, "sent": [(["e4"], 1)]}),
    "a token the stream carried goes on": (partial_replay_of_a_token, {
        "unmet": [], "continued": [(True, False)], "told": 0, "sent": [(["x"], 1)]}),
    "told by a JSON-RPC error": (refused_with_an_error, {
        "unmet": [(["e3"], False)], "continued": [], "told": 1, "sent": [([], 1)]}),
    "told by an event type": (told_by_event_type, {
        "unmet": [(["e3"], False)], "continued": [], "told": 1, "sent": [(["n1"], 1)]}),
    "told by `resumed: false`": (told_by_data, {
        "unmet": [(["e3"], False)], "continued": [], "told": 1, "sent": [(["n1"], 1)]}),
}  # fmt: skip


@pytest.mark.parametrize(("build", "expected"), CASES.values(), ids=CASES.keys())
def test_each_answer_judged(build: Build, expected: dict[str, Any]) -> None:
    assert judged(build) == expected


def test_unmet_is_collected_once() -> None:
    c = Capture().open()
    fresh_answer(c)
    tl = timeline_of(c)
    resumes = tl.resumes_at_cursor
    due = continuations.due(tl, resumes)
    unmet = continuations.unmet(tl, resumes, continuations.answers(tl, resumes), due)
    assert isinstance(unmet, pl.LazyFrame)
    assert unmet.explain().startswith("DF [")  # an in-memory frame, not a plan to run again
