"""Pieces of finding text that several detectors write alike."""

from __future__ import annotations

from typing import Final

import polars as pl

OPENER: Final = pl.format("{} request {}", "request_method", "request_id")
"""What opened a stream (`Timeline.streams`): `tools/call request 3`; null for a GET stream."""


def json_number(name: str) -> pl.Expr:
    """The float in column `name` as JSON wrote it: 6.0 as 6."""
    x = pl.col(name)
    return pl.when(x % 1 == 0).then(x.cast(pl.Int64).cast(pl.String)).otherwise(x.cast(pl.String))


def pick(*branches: tuple[pl.Expr, str], otherwise: str | pl.Expr) -> pl.Expr:
    """The text of the first branch whose condition holds, else `otherwise`."""
    last = otherwise if isinstance(otherwise, pl.Expr) else pl.lit(otherwise)
    return pl.coalesce(*(pl.when(cond).then(pl.lit(text)) for cond, text in branches), last)


def seconds(delta: pl.Expr) -> pl.Expr:
    """A duration as seconds to one decimal: `12.3`."""
    return (delta.dt.total_milliseconds() / 1000).round(1).cast(pl.String)
