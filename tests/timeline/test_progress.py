"""analyzer.timeline.progress: progress groups and the step each counts in (how a jump is
judged: tests/detectors/test_causal_gap.py)."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from analyzer.timeline.progress import (
    PROGRESS_COLUMNS,
    STEP_COLUMNS,
    earlier_tokens,
    first_of_incarnation,
    needing_total,
    progress_groups,
    settled_steps,
    token_steps,
)
from analyzer.timeline.replays import RESUMED_PROGRESS_COLUMNS

# (stream_id, incarnation, stream_pos, progress_token, progress, data_hash), in the order of
# `resumed_progress`: stream, token, position.
_ROWS = [
    ("a", 0, 0, "t", 1.0, "h1"),  # a/t: increments 1 and 3 on incarnation 0 (uneven)
    ("a", 0, 1, "t", 2.0, "h2"),
    ("a", 0, 2, "t", 5.0, "h3"),
    ("a", 1, 3, "t", 9.0, "h4"),  # across a resume: no increment
    ("a", 0, 0, "u", 0.5, "h5"),  # a/u: 0.5 a step, twice (even)
    ("a", 0, 1, "u", 1.0, "h6"),
    ("a", 0, 2, "u", 1.5, "h7"),
    ("b", 0, 0, "t", 3.0, "h8"),  # b/t: one value an incarnation, integers: `total` decides
    ("b", 1, 1, "t", 7.0, "h9"),
    ("c", 0, 0, "t", 0.25, "h10"),  # c/t: no increment, not integral: no step
    ("c", 1, 1, "t", 0.75, "h11"),
]


def _resumed_progress() -> pl.LazyFrame:
    stream, inc, pos, token, value, data = zip(*_ROWS, strict=True)
    frame = pl.LazyFrame(
        {
            "stream_id": stream,
            "incarnation": inc,
            "stream_pos": pos,
            "ts": [None] * len(_ROWS),
            "event_id": [f"e{n}" for n in range(len(_ROWS))],
            "data_hash": data,
            "progress_token": token,
            "progress": value,
        },
        schema_overrides={"ts": pl.Datetime("ns", "UTC")},
    )
    return frame.select(RESUMED_PROGRESS_COLUMNS)


def test_progress_groups_number_each_stream_and_token_in_order() -> None:
    got = progress_groups(_resumed_progress()).collect()
    assert got.columns == list(PROGRESS_COLUMNS)
    assert got["gid"].to_list() == [1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4]
    firsts = first_of_incarnation(progress_groups(_resumed_progress())).collect()
    assert firsts.select("gid", "incarnation").rows() == [
        (1, 0), (1, 1), (2, 0), (3, 0), (3, 1), (4, 0), (4, 1)
    ]  # fmt: skip


def test_token_steps_take_increments_within_one_incarnation() -> None:
    steps = token_steps(progress_groups(_resumed_progress())).collect().sort("gid")
    assert steps.select("gid", "stream_id", "d", "d_max", "integral").rows() == [
        (1, "a", 1.0, 3.0, True),
        (2, "a", 0.5, 0.5, False),
        (3, "b", None, None, True),
        (4, "c", None, None, False),
    ]
    # Only the integral group without increments needs its `total` read.
    assert needing_total(steps.lazy()).collect()["data_hash"].to_list() == ["h8"]


def test_settled_steps_fall_back_on_an_integer_total() -> None:
    steps = token_steps(progress_groups(_resumed_progress()))
    totals = pl.LazyFrame({"data_hash": ["h8"], "total": [10.0]})
    got = settled_steps(steps, totals).collect().sort("gid")
    expected = pl.DataFrame(
        {
            "gid": [1, 2, 3],
            "stream_id": ["a", "a", "b"],
            "d": [1.0, 0.5, 1.0],
            "even": [False, True, True],
        }
    ).select(STEP_COLUMNS)
    assert_frame_equal(got, expected, check_dtypes=False)


def test_settled_steps_leave_out_a_total_that_counts_no_steps() -> None:
    steps = token_steps(progress_groups(_resumed_progress()))
    for total in (10.5, None):
        totals = pl.LazyFrame(
            {"data_hash": ["h8"], "total": [total]},
            schema={"data_hash": pl.String, "total": pl.Float64},
        )
        got = settled_steps(steps, totals).collect()
        assert sorted(got["gid"].to_list()) == [1, 2]


def test_earlier_tokens_find_answers_going_on_with_an_earlier_token() -> None:
    answers = pl.LazyFrame(
        {
            "r_flow": ["g1", "g2", "g3"],
            "stream_id": ["a", "b", "z"],
            "incarnation": [1, 0, 1],
        }
    )
    # a/1 carries token t, first seen on a/0: g1 went on; b/0 is where b's t starts (g2:
    # nothing earlier); z carried no progress (g3).
    got = earlier_tokens(_resumed_progress(), answers).collect()
    assert got["r_flow"].to_list() == ["g1"]
