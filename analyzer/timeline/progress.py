"""Progress of the resumed streams: each (stream, token) numbered, and the step it counts in.

`causal-gap` reads a replay that skipped from how far a token's progress jumped across a resume,
measured in the token's step (DESIGN.md §5). `progress_groups` numbers each (stream, token) of
`Timeline.resumed_progress` (`gid`: the joins hash a number, not texts); `token_steps` takes each
group's smallest positive increment within one incarnation, on any of them; `settled_steps`
falls back to a step of 1 when the values are integers under an integer `total` (the progress
counts steps), read from the payloads of `needing_total` only.
"""

from __future__ import annotations

from typing import Final

import polars as pl

__all__ = [
    "PROGRESS_COLUMNS",
    "STEP_COLUMNS",
    "earlier_tokens",
    "first_of_incarnation",
    "needing_total",
    "progress_groups",
    "settled_steps",
    "token_steps",
]

PROGRESS_COLUMNS: Final = ("stream_id", "incarnation", "stream_pos", "ts", "event_id",
                           "data_hash", "token", "p", "gid")  # fmt: skip
"""The columns of `progress_groups`: `token` the progress token, `p` its value."""

STEP_COLUMNS: Final = ("gid", "stream_id", "d", "even")
"""The columns of `settled_steps`: `d` the step, `even` whether it is sure (all increments
equal, or counted by `total`) rather than a bound of uneven increments."""

_SAME_INCARNATION: Final = (
    (pl.col("gid") == pl.col("gid").shift())
    & (pl.col("incarnation") == pl.col("incarnation").shift())
).fill_null(False)


def progress_groups(resumed_progress: pl.LazyFrame) -> pl.LazyFrame:
    """`resumed_progress` (in order of stream, token and position), each (stream, token)
    numbered in that order (`gid`); columns `PROGRESS_COLUMNS`."""
    new_group = pl.any_horizontal(
        pl.col(c).ne_missing(pl.col(c).shift()) for c in ("stream_id", "token")
    )
    return (
        resumed_progress.select(
            "stream_id",
            "incarnation",
            "stream_pos",
            "ts",
            "event_id",
            "data_hash",
            pl.col("progress_token").alias("token"),
            pl.col("progress").alias("p"),
        )
        .with_columns(new_group.cum_sum().alias("gid"))
        .select(PROGRESS_COLUMNS)
    )


def first_of_incarnation(progress: pl.LazyFrame) -> pl.LazyFrame:
    """The first value of each group on each incarnation (`progress_groups` rows)."""
    return progress.filter(~_SAME_INCARNATION)


def token_steps(progress: pl.LazyFrame) -> pl.LazyFrame:
    """Per group of `progress_groups`: its stream, the smallest (`d`) and largest (`d_max`)
    positive increment within one incarnation (null without any), whether every value is an
    integer (`integral`) and one notification's `data_hash` (where `total` is read)."""
    inc = pl.when(_SAME_INCARNATION).then(pl.col("p") - pl.col("p").shift())
    return (
        progress.select("gid", "stream_id", "data_hash", "p", inc.alias("_d"))
        .group_by("gid")
        .agg(
            pl.col("stream_id").first(),
            pl.col("_d").filter(pl.col("_d") > 0).min().alias("d"),
            pl.col("_d").filter(pl.col("_d") > 0).max().alias("d_max"),
            (pl.col("p") % 1 == 0).all().alias("integral"),
            pl.col("data_hash").first(),
        )
    )


def needing_total(steps: pl.LazyFrame) -> pl.LazyFrame:
    """The payloads whose `total` decides a step: those of integral groups without increments."""
    return (
        steps.filter(pl.col("d").is_null() & pl.col("integral"))
        .select("data_hash")
        .drop_nulls()
        .unique()
    )


def settled_steps(steps: pl.LazyFrame, totals: pl.LazyFrame) -> pl.LazyFrame:
    """Each group's step (columns `STEP_COLUMNS`): its smallest increment, else 1 when its
    payload's `total` (`totals`: `data_hash`, `total`) is an integer; groups with neither
    are left out."""
    counted = totals.select("data_hash", (pl.col("total") % 1 == 0).fill_null(False).alias("c"))
    return (
        steps.join(counted, on="data_hash", how="left")
        .with_columns(
            pl.when(pl.col("d").is_not_null())
            .then(pl.col("d"))
            .when(pl.col("c").fill_null(False))
            .then(pl.lit(1.0))
            .alias("d"),
            (
                pl.col("d").is_null() | (pl.col("d_max") - pl.col("d") <= 1e-9 * pl.col("d_max"))
            ).alias("even"),
        )
        .filter(pl.col("d").is_not_null())
        .select(STEP_COLUMNS)
    )


def earlier_tokens(resumed_progress: pl.LazyFrame, answers: pl.LazyFrame) -> pl.LazyFrame:
    """The answers (`r_flow`) carrying progress on a token an earlier incarnation of their
    stream carried: they went on with the stream's own work. `answers`: `r_flow, stream_id,
    incarnation`."""
    tokens = resumed_progress.select("stream_id", "incarnation", "progress_token")
    first = tokens.group_by("stream_id", "progress_token").agg(
        pl.col("incarnation").min().alias("before")
    )
    return (
        answers.unique()
        .join(tokens.unique(), on=["stream_id", "incarnation"])
        .join(first, on=["stream_id", "progress_token"])
        .filter(pl.col("before") < pl.col("incarnation"))
        .select("r_flow")
        .unique()
    )
