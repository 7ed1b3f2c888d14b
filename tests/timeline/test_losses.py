"""The evidence of what a resumed stream lost after its cursor (analyzer/timeline/losses.py; the
finding it makes is judged in tests/detectors/test_causal_gap.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from analyzer.timeline import losses
from tests.support.records import Capture, event, res, timeline_of
from tests.support.streams import Session, note, prime, progress

U = ("6f1c0a52-3e9b-4c1d-9a57-0b2e8d4f6a11", "a3d9e6f0-7b21-4f8e-8c3a-5e0d1b9c2f47",
     "0c8e5b7a-9d14-4e2f-b6a1-3f7c9e2d8b50", "d27f4a13-6c5e-4b98-a0e1-8b3c7d9f1e62",
     "91b0e8d2-4a6f-4c37-9e15-2d8a6b4c0f73", "5e2a7c91-0b3d-4f68-8a24-c6e1f9d7b384")  # fmt: skip


def result(i: str, rid: int) -> str:
    return event(res(rid, content=[{"type": "text", "text": "done"}]), id=i)


def timeline(build: Callable[[Capture], None]) -> Any:
    c = Capture().open()
    build(c)
    return timeline_of(c)


def evicted(c: Capture) -> None:
    """The replay starts at progress 6 (e7) after the client's 3 (e4): e5, e6 never sent."""
    s = Session(c, "ring-1")
    s.call(3, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e4", progress("e7", 6), progress("e8", 7), result("e9", 3))


def older_cursor_fresh_answer(c: Capture) -> None:
    """Resumed from U[1], answered with fresh messages: U[2], U[3] were due again; the
    response to request 4 never comes."""
    s = Session(c, "rr-1")
    s.call(4, prime(U[0]), progress(U[1], 1), progress(U[2], 2), progress(U[3], 3))
    s.resume(U[1], prime(U[4]), note(U[5], "fresh"), end="client_closed", replica="b")


def full_replay(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e2", progress("e3", 2), progress("e4", 3), progress("e5", 4), result("e6", 5))


def test_carried_names_what_no_incarnation_delivered_again() -> None:
    tl = timeline(older_cursor_fresh_answer)
    assert losses.carried(tl).select("cursor", "lost").collect().rows() == [(U[1], [U[2], U[3]])]
    assert losses.carried(timeline(full_replay)).collect().is_empty()


def test_progress_jumps_measure_from_the_clients_last_value() -> None:
    tl = timeline(evicted)
    resumes, _, contiguous = losses.resumes(tl)
    jumps = losses.progress_jumps(tl, resumes.lazy(), contiguous.lazy(), 1.5).collect()
    assert jumps.select("event_id", "p", "p_last", "d", "even").rows() == [
        ("e7", 6.0, 3.0, 1.0, True)
    ]


def test_a_counter_going_on_at_cursor_plus_one_jumps_nowhere() -> None:
    def counter_goes_on(c: Capture) -> None:
        s = Session(c, "S1")
        s.call(5, prime("s1_1"), progress("s1_2", 100), progress("s1_3", 350))
        s.resume("s1_3", progress("s1_4", 5000), result("s1_5", 5))

    tl = timeline(counter_goes_on)
    resumes, _, contiguous = losses.resumes(tl)
    assert contiguous.to_series().len() == 1
    assert losses.progress_jumps(tl, resumes.lazy(), contiguous.lazy(), 1.5).collect().is_empty()


@pytest.mark.parametrize(
    ("build", "went_on"),
    [(evicted, [("e4", "e7", 4, 7)]), (full_replay, [])],
    ids=["skipped e5, e6", "went on at e3"],
)
def test_counter_skips_name_the_id_the_replay_went_on_at(
    build: Callable[[Capture], None], went_on: list[tuple[Any, ...]]
) -> None:
    tl = timeline(build)
    resumes, counted, _ = losses.resumes(tl)
    skips = losses.counter_skips(tl, resumes.lazy(), counted).collect()
    assert skips.select("cursor", "a_event_id", "c_n", "a_n").rows() == went_on


def test_owed_is_a_response_no_incarnation_brought() -> None:
    tl = timeline(older_cursor_fresh_answer)
    resumes, _, _ = losses.resumes(tl)
    assert losses.owed(tl, resumes.lazy()).select("request_id", "cursor").collect().rows() == [
        ("4", U[1])
    ]
    tl = timeline(full_replay)
    resumes, _, _ = losses.resumes(tl)
    assert losses.owed(tl, resumes.lazy()).collect().is_empty()


def _part(stream: str, text: str, level: int, at: int) -> pl.LazyFrame:
    ts = pl.Series([at], dtype=pl.Int64).cast(pl.Datetime("ns", "UTC"))
    return pl.LazyFrame(
        {"stream_id": [stream], "text": [text], "event_ids": [[f"e{at}"]],
         "flow_ids": [[f"f{at}"]], "first_ts": ts, "last_ts": ts, "level": [level]}
    )  # fmt: skip


def test_gathered_makes_one_row_a_stream_in_the_order_of_the_parts() -> None:
    none = _part("s", "", 0, 0).clear()
    medium, high = losses.MEDIUM, losses.HIGH
    parts = (none, _part("s", "progress.", medium, 2), _part("s", "ids.", medium, 1), none)
    row = losses.gathered(parts).collect().row(0, named=True)
    assert (row["text"], row["event_ids"], row["sure"]) == ("progress. ids.", ["e2", "e1"], True)
    alone = losses.gathered((none, none, _part("s", "ids.", medium, 1), none)).collect()
    assert alone["sure"].to_list() == [False]
    carried = losses.gathered((_part("s", "carried.", high, 1), none, none, none)).collect()
    assert carried["sure"].to_list() == [True]
