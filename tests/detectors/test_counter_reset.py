"""counter-reset: an event-id counter that restarts or runs backwards within one stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from analyzer.detectors.counter_reset import DETECTOR
from analyzer.timeline.counters import id_counter
from tests.support.records import Capture
from tests.support.streams import Session, findings, note, prime, progress

U = ("6f1c0a52-3e9b-4c1d-9a57-0b2e8d4f6a11", "a3d9e6f0-7b21-4f8e-8c3a-5e0d1b9c2f47",
     "0c8e5b7a-9d14-4e2f-b6a1-3f7c9e2d8b50", "d27f4a13-6c5e-4b98-a0e1-8b3c7d9f1e62")  # fmt: skip
# TypeScript SDK ids, `<streamId>_<epoch-ms>_<rand>`, here with an all-digit random part.
TS = "15ebf62e-07b4-4391-a83e-033ef8d202cf_{}_{}"


def resume(s: Session, cursor: str) -> str:
    """A resume from `cursor` that replica b answers; its chunks are sent by hand."""
    return s.open(cursor=cursor, replica="b")


def run(build: Callable[[Capture], None]) -> list[dict[str, Any]]:
    return findings(build, DETECTOR.id, opened=True).to_dicts()


# --- must flag --------------------------------------------------------------------------------


def ttl_collected_buffer(c: Capture) -> None:
    s = Session(c, "ttl-1")
    s.send(s.open(3), 0, prime("e1"), progress("e2", 1), progress("e3", 2), end="client_closed")
    s.send(resume(s, "e3"), 0, prime("e1"), note("e2", "fresh"), end="client_closed")


def restarted_below_the_cursor_without_collision(c: Capture) -> None:
    s = Session(c, "S1")
    s.send(s.open(3), 0, progress("105", 1), progress("106", 2), progress("107", 3), end="error")
    s.send(resume(s, "107"), 0, progress("101", 4), end="complete")


def ran_backwards_within_one_response(c: Capture) -> None:
    s = Session(c, "b64U2Vzc2lvbg")
    s.send(s.open(), 0, note("s2_17", "a"), note("s2_18", "b"), note("s2_3", "c"), end="complete")


FLAGGED = {
    "TTL-collected buffer: e3 -> e1, e2": (ttl_collected_buffer, "high", ["e3", "e1", "e2"]),
    "below the cursor, ids still unique": (
        restarted_below_the_cursor_without_collision, "medium", ["107", "101"]),
    "backwards within one response": (ran_backwards_within_one_response, "medium", ["s2_3"]),
}  # fmt: skip


@pytest.mark.parametrize(("build", "severity", "event_ids"), FLAGGED.values(), ids=FLAGGED.keys())
def test_flags_a_counter_that_went_back(
    build: Callable[[Capture], None], severity: str, event_ids: list[str]
) -> None:
    found = run(build)
    assert len(found) == 1
    assert found[0]["severity"] == severity
    assert found[0]["event_ids"] == event_ids
    assert "What to change" in found[0]["detail"]


def test_ttl_detail_names_the_cursor_and_the_collision() -> None:
    detail = run(ttl_collected_buffer)[0]["detail"]
    assert "e1, e2 at or below the resume's cursor e3" in detail
    assert "already issued in the session with another payload" in detail


# --- must not flag ----------------------------------------------------------------------------


def exact_replay_from_an_older_point(c: Capture) -> None:
    s = Session(c, "S1")
    s.send(s.open(3), 0, prime("e5"), progress("e6", 1), progress("e7", 2), end="client_closed")
    s.send(resume(s, "e7"), 0, progress("e6", 1), progress("e7", 2), progress("e8", 3), prime("e9"))


def interleaved_streams_share_one_counter(c: Capture) -> None:
    s = Session(c, "S1")
    a, b = s.open(1), s.open(2)
    for n, (i, j) in enumerate((("1", "2"), ("3", "4"), ("5", "6"))):
        s.send(a, n, progress(i, n))
        s.send(b, n, progress(j, n))
    s.c.end(a, "client_closed")
    s.send(resume(s, "3"), 0, progress("5", 2), progress("7", 3), end="complete")


def epoch_milliseconds_run_back_across_replicas(c: Capture) -> None:
    s = Session(c, "S1")
    first = (TS.format(1750000000120, 11), TS.format(1750000000125, 12))
    s.send(s.open(3), 0, prime(first[0]), progress(first[1], 1), end="client_closed")
    s.send(
        resume(s, first[1]),
        0,
        prime(TS.format(1750000000090, 13)),
        progress(TS.format(1750000000095, 14), 2),
    )


def uuid_ids(c: Capture) -> None:
    s = Session(c, "S1")
    s.send(s.open(3), 0, prime(U[0]), progress(U[1], 1), end="client_closed")
    s.send(resume(s, U[1]), 0, progress(U[2], 2), prime(U[3]), end="complete")


def different_prefix_after_the_resume(c: Capture) -> None:
    s = Session(c, "S1")
    s.send(s.open(3), 0, prime("a-7"), progress("a-8", 1), end="client_closed")
    s.send(resume(s, "a-8"), 0, progress("b-1", 2), progress("b-2", 3), end="complete")


CLEAN = {
    "exact replay from an older point, new priming after": exact_replay_from_an_older_point,
    "interleaved streams sharing one counter": interleaved_streams_share_one_counter,
    "epoch-ms ids running back across replicas": epoch_milliseconds_run_back_across_replicas,
    "UUID ids": uuid_ids,
    "another prefix after the resume (opaque)": different_prefix_after_the_resume,
}


@pytest.mark.parametrize("build", CLEAN.values(), ids=CLEAN.keys())
def test_quiet_on_counters_that_move_on(build: Callable[[Capture], None]) -> None:
    assert run(build) == []


# --- the counter split ------------------------------------------------------------------------

# (id, prefix, counter): the trailing run of 1 to 9 ASCII digits, else no counter.
SPLITS = [
    ("17", "", 17), ("0", "", 0), ("e7", "e", 7), ("s2_17", "s2_", 17), ("x_007", "x_", 7),
    ("123456789", "", 123456789), ("_123456789", "_", 123456789), ("日本_42", "日本_", 42),
    ("e\u0663" "7", "e\u0663", 7), ("1234567890", None, None), ("a1234567890", None, None),
    ("1750000000000", None, None), ("", None, None), ("abc", None, None), ("e_", None, None),
    ("x\u0661\u0662", None, None), (None, None, None),
]  # fmt: skip


def test_the_counter_is_the_trailing_run_of_ascii_digits() -> None:
    ids = pl.DataFrame({"event_id": [i for i, _, _ in SPLITS]}, schema={"event_id": pl.String})
    split = ids.select(id_counter("event_id", "prefix", "n"))
    assert split.rows() == [(prefix, n) for _, prefix, n in SPLITS]


def test_ids_ending_in_digits_of_another_script_are_no_counter() -> None:
    # `\d` in a regex takes Arabic-Indic digits, which do not parse as integers: the detector
    # once failed on such an id (an analysis-error) instead of reading it as opaque.
    def build(c: Capture) -> None:
        s = Session(c, "S1")
        ids = ("e\u0661", "e\u0662", "e\u0663", "e\u0661")  # 1, 2, 3, then 1 again
        s.send(s.open(), 0, *(note(i, str(n)) for n, i in enumerate(ids)), end="complete")

    assert run(build) == []
