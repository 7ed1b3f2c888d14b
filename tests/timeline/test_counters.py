"""analyzer.timeline.counters: how event-id counters move per incarnation (the split of an id
into prefix and counter: tests/detectors/test_counter_reset.py)."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from analyzer import schema as S
from analyzer.timeline.counters import (
    carried_between,
    id_counters,
    own_prefixes,
    ran_back,
    ran_back_by_incarnation,
    resume_counters,
    went_on_at,
)
from tests.support.records import Capture, timeline_of
from tests.support.streams import Session, note, progress


def test_id_counters_summarise_each_incarnation_and_prefix() -> None:
    rows = [  # (stream_id, incarnation, ordinal, event_id)
        ("a", 0, 0, "e1"),  # a/0: rises by one an event: lo == hi
        ("a", 0, 1, "e2"),
        ("a", 0, 2, "e3"),
        ("a", 1, 0, "e2"),  # a/1 (a resume) restarts lower
        ("a", 1, 1, "e7"),
        ("b", 0, 0, "s_9"),
        ("b", 0, 1, ""),  # no id
        ("b", 0, 2, "s_4"),
        ("b", 0, 3, "opaque"),  # no counter
        ("c", 0, 0, "c_1750000000123_5"),  # an epoch in the prefix: left out
    ]
    names = ("stream_id", "incarnation", "ordinal", "event_id")
    events = pl.LazyFrame(
        {name: [dict(zip(names, r, strict=True)).get(name) for r in rows] for name in S.SSE_EVENTS},
        schema=S.SSE_EVENTS,
    )
    got = id_counters(events).collect().sort("stream_id", "incarnation").rows()
    assert got == [
        ("a", 0, "e", 1, 1, 1),
        ("a", 1, "e", 2, 6, 2),
        ("b", 0, "s_", 2, 9, 4),
    ]


def test_resume_counters_place_cursor_and_answer_on_the_stream_counter() -> None:
    # g1 resumes a per-stream counter (evt-000002 -> evt-000005); g2 ids of one prefix and
    # random digits (no counter rising by one on its incarnation); g3 ids with no counter; g4 a
    # new priming event alone.
    resumes = pl.LazyFrame(
        {
            "r_flow": ["g1", "g2", "g3", "g4"],
            "stream_id": ["a", "b", "c", "a"],
            "r_inc": [1, 1, 1, 2],
            "cursor_flow_id": ["a", "b", "c", "g1"],
            "cursor": ["evt-000002", "x-93", "opaque", "evt-000006"],
        }
    )
    rows = [  # (stream_id, flow_id, incarnation, ordinal, event_id, id_only)
        ("a", "a", 0, 0, "evt-000001", True),
        ("a", "a", 0, 1, "evt-000002", False),
        ("a", "g1", 1, 0, "evt-000005", False),
        ("a", "g1", 1, 1, "evt-000006", False),
        ("b", "b", 0, 0, "x-7", False),
        ("b", "b", 0, 1, "x-93", False),
        ("b", "g2", 1, 0, "x-15", False),
        ("c", "c", 0, 0, "opaque", False),
        ("c", "g3", 1, 0, "other", False),
        ("a", "g4", 2, 0, "evt-000009", True),  # g4: only a new priming event, no replay
    ]
    names = ("stream_id", "flow_id", "incarnation", "ordinal", "event_id", "id_only")
    events = pl.LazyFrame([dict(zip(names, r, strict=True)) for r in rows])
    incarnations = pl.LazyFrame(
        {
            "flow_id": ["a", "g1", "b", "g2", "c", "g3", "g4"],
            "incarnation": [0, 1, 0, 1, 0, 1, 2],
            "payload_events": [1, 2, 2, 1, 1, 1, 0],
        }
    )
    counters = id_counters(events)
    got = resume_counters(resumes, counters, incarnations).collect().sort("r_flow")
    assert got.rows() == [("g1", "a", "evt-", 2, 5, True), ("g2", "b", "x-", 93, 15, False)]


def test_carried_between_keeps_skips_some_event_fills_unless_a_counter_of_its_own() -> None:
    # r1 skips e3..e4 (cursor e2, answer e5) in session s; r2 the same in session t; r3 skips
    # x3 in session s.
    resumed = pl.LazyFrame(
        {
            "r_flow": ["r1", "r2", "r3"],
            "r_session": ["s", "t", "s"],
            "prefix": ["e", "e", "x"],
            "c_n": [2, 2, 2],
            "a_n": [5, 5, 4],
        }
    )
    events = pl.LazyFrame(
        {
            # s carries e1, e2, e5; u carries e3 (a shared counter's number: fills r1's gap) and
            # t carries e2 and e4: a counter of its own, since s carries e2 too, so e4 says
            # nothing of s's gap; x3 appears nowhere.
            "session_id": ["s", "s", "s", "u", "t", "t", "t", "s", "s"],
            "event_id": ["e1", "e2", "e5", "e3", "e2", "e4", "e5", "x2", "x4"],
        }
    )
    # r1: u's e3 fills the gap (u carries none of s's numbers); t's e4 does not count (t
    # carries s's e2 and e5: a counter of its own). r2: u's e3, and t's own e4. r3: no x3.
    seen = carried_between(resumed, events).collect()["r_flow"]
    assert sorted(set(seen)) == ["r1", "r2"]
    # Without u, r1's gap is filled only by a session counting on its own: nothing.
    alone = carried_between(resumed, events.filter(pl.col("session_id") != "u")).collect()
    assert sorted(set(alone["r_flow"])) == ["r2"]


def test_went_on_at_names_the_first_event_at_the_answer_counter() -> None:
    skips = pl.LazyFrame({"r_flow": ["g1", "g2"], "prefix": ["e", "e"], "a_n": [5, 9]})
    answers = pl.LazyFrame(
        {
            "flow_id": ["g1", "g1", "g1", "g2", "other"],
            "ordinal": [0, 1, 2, 0, 0],
            "event_id": ["p", "e5", "e5", "e8", "e9"],
        }
    )
    got = went_on_at(skips, answers).collect()
    assert got.rows() == [("g1", "e5")]  # g2 carried no e9; `other` is no answer


def test_own_prefixes_name_a_stream_only_where_other_streams_count_apart() -> None:
    streams = pl.LazyFrame(
        {"stream_id": ["a", "b", "c", "d", "e"], "session_id": ["s", "s", "t", "t", "u"]}
    )
    counters = pl.LazyFrame(
        {
            # s: a and b each count under their own prefix; t: c and d share one counter;
            # u: e is its session's only stream.
            "stream_id": ["a", "b", "c", "d", "e"],
            "prefix": ["a_", "b_", "evt-", "evt-", "e_"],
        }
    )
    candidates = pl.LazyFrame(
        {"stream_id": ["a", "c", "e", "a"], "prefix": ["a_", "evt-", "e_", "a_"]}
    )
    got = own_prefixes(candidates, streams, counters).collect()
    assert got.rows() == [("a", "a_")]


def _ran_back(build: Callable[[Session], None]) -> list[tuple[object, ...]]:
    c = Capture().open()
    build(Session(c, "S1"))
    tl = timeline_of(c)
    got = ran_back(tl.sse_events, tl.incarnations, tl.id_counters).sort("ts", "ordinal")
    return (
        got.select("event_id", "incarnation", "cursor", "at_cursor", "exact", "reused")
        .collect()
        .rows()
    )


def test_ran_back_finds_ids_at_or_below_the_cursor_or_the_highest_sent() -> None:
    def below_the_cursor(s: Session) -> None:
        s.send(
            s.open(3), 0, progress("105", 1), progress("106", 2), progress("107", 3), end="error"
        )
        s.send(s.open(cursor="107", replica="b"), 0, progress("101", 4), end="complete")

    def back_within_one_response(s: Session) -> None:
        s.send(
            s.open(), 0, note("s2_17", "a"), note("s2_18", "b"), note("s2_3", "c"), end="complete"
        )

    def an_exact_replay_and_a_reused_id(s: Session) -> None:
        s.send(s.open(3), 0, note("e1", "a"), note("e2", "b"), note("e3", "c"), end="error")
        s.send(
            s.open(cursor="e3", replica="b"), 0, note("e2", "b"), note("e3", "x"), end="complete"
        )

    def rising(s: Session) -> None:
        s.send(s.open(3), 0, note("e1", "a"), note("e2", "b"), end="error")
        s.send(s.open(cursor="e2", replica="b"), 0, note("e3", "c"), end="complete")

    assert _ran_back(below_the_cursor) == [("101", 1, "107", True, False, False)]
    assert _ran_back(back_within_one_response) == [("s2_3", 0, None, False, False, False)]
    assert _ran_back(an_exact_replay_and_a_reused_id) == [
        ("e2", 1, "e3", True, True, True),
        ("e3", 1, "e3", True, False, True),
    ]
    assert _ran_back(rising) == []


def test_ran_back_by_incarnation_gathers_an_incarnations_ids_in_wire_order() -> None:
    def replay_then_reuse(s: Session) -> None:
        s.send(s.open(3), 0, note("e1", "a"), note("e2", "b"), note("e3", "c"), end="error")
        s.send(
            s.open(cursor="e3", replica="b"), 0, note("e2", "b"), note("e3", "x"), end="complete"
        )

    def back_within_one_response(s: Session) -> None:
        s.send(
            s.open(),
            0,
            note("s2_17", "a"),
            note("s2_18", "b"),
            note("s2_3", "c"),
            note("s2_4", "d"),
            end="complete",
        )

    def gathered(build: Callable[[Session], None]) -> list[tuple[object, ...]]:
        c = Capture().open()
        build(Session(c, "S1"))
        tl = timeline_of(c)
        got = ran_back_by_incarnation(tl.sse_events, tl.incarnations, tl.id_counters)
        columns = ("incarnation", "back", "new", "collides", "below_cursor", "cursor", "replica")
        return got.select(columns).collect().rows()

    assert gathered(replay_then_reuse) == [(1, ["e2", "e3"], ["e3"], True, True, "e3", "b")]
    assert gathered(back_within_one_response) == [
        (0, ["s2_3", "s2_4"], ["s2_3", "s2_4"], False, False, None, "127.0.0.1:9000")
    ]
