"""analyzer.timeline.counters: how event-id counters move per incarnation (the split of an id
into prefix and counter: tests/detectors/test_counter_reset.py)."""

from __future__ import annotations

import polars as pl

from analyzer import schema as S
from analyzer.timeline.counters import id_counters


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
