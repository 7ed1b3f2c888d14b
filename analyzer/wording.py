"""Pieces of finding text that several detectors write alike."""

from __future__ import annotations

import string
from typing import Final

import polars as pl

OPENER: Final = pl.format("{} request {}", "request_method", "request_id")
"""What opened a stream (`Timeline.streams`): `tools/call request 3`; null for a GET stream."""


def text(template: str, /, **values: str | pl.Expr) -> pl.Expr:
    """Finding text from `template`, a `pl.format` with named placeholders.

    `{name}` is the keyword `name` when one is given (an expression, or a column name as a
    str), else the column `name`; `{{` and `}}` are literal braces. As with `pl.format`, the
    text is null where any value is null. A placeholder that is not a plain name, and a keyword
    the template does not use, are a ValueError naming it.
    """
    literal, args, used = [], [], set()
    for before, name, spec, conversion in string.Formatter().parse(template):
        literal.append(before.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(f"placeholder {{{name}}} in finding text is not a plain name")
        value = values.get(name, name)
        args.append(pl.col(value) if isinstance(value, str) else value)
        literal.append("{}")
        used.add(name)
    unused = sorted(set(values) - used)
    if unused:
        raise ValueError(f"finding text has no placeholder for {', '.join(unused)}")
    return pl.format("".join(literal), *args)


def or_unknown(name: str) -> pl.Expr:
    """Column `name`, `unknown` where it is null (a replica the capture does not name)."""
    return pl.col(name).fill_null("unknown")


def json_number(name: str) -> pl.Expr:
    """The float in column `name` as JSON wrote it: 6.0 as 6."""
    x = pl.col(name)
    return pl.when(x % 1 == 0).then(x.cast(pl.Int64).cast(pl.String)).otherwise(x.cast(pl.String))


def pick(*branches: tuple[pl.Expr, str], otherwise: str | pl.Expr) -> pl.Expr:
    """The text of the first branch whose condition holds, else `otherwise`."""
    last = otherwise if isinstance(otherwise, pl.Expr) else pl.lit(otherwise)
    return pl.coalesce(*(pl.when(cond).then(pl.lit(said)) for cond, said in branches), last)


def seconds(delta: pl.Expr) -> pl.Expr:
    """A duration as seconds to one decimal: `12.3`."""
    return (delta.dt.total_milliseconds() / 1000).round(1).cast(pl.String)
