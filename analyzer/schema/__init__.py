"""The Polars schema of every stage boundary, declared once (STYLE.md §7).

Two layers:

- the *normalized* tables (`RAW_*`, `PAYLOADS`): what normalize derives from capture records and
  what the Parquet cache stores; one row per flow, per SSE event, per JSON-RPC message, per tool
  listed in a `tools/list` result, per distinct payload text;
- the *timeline* frames (`EXCHANGES` ... `SESSIONS`): what detectors read, with every row placed
  in its session, logical stream and incarnation (DESIGN.md §2).

Key columns come first, always in the order `session_id, stream_id, ts, seq` where they apply.
`ts` is the wire time of the record (UTC, ns); `seq` the capture writer's sequence number of that
record (ordering within one capture run; `input` tells which input it came from).

The dtypes they share are in `dtypes`, the normalized tables in `tables`, the timeline frames
(derived ones too) in `timeline`: each module's `__all__` is named here too.
"""

from __future__ import annotations

import polars as pl

from analyzer.schema import dtypes, tables, timeline
from analyzer.schema.dtypes import *  # noqa: F403  (every name of `__all__` below)
from analyzer.schema.tables import *  # noqa: F403
from analyzer.schema.timeline import *  # noqa: F403

__all__ = ["SchemaMismatch", "assert_schema", "empty"]
__all__ += dtypes.__all__
__all__ += tables.__all__
__all__ += timeline.__all__


class SchemaMismatch(AssertionError):
    """A frame's columns or dtypes differ from the declared schema."""


def assert_schema(frame: pl.DataFrame | pl.LazyFrame, expected: pl.Schema) -> None:
    """Raise SchemaMismatch unless `frame` has exactly `expected`'s columns, order and dtypes."""
    actual = frame.collect_schema() if isinstance(frame, pl.LazyFrame) else frame.schema
    if list(actual.items()) == list(expected.items()):
        return
    missing = [name for name in expected if name not in actual]
    extra = [name for name in actual if name not in expected]
    wrong = [
        f"{name}: {actual[name]} != {dtype}"
        for name, dtype in expected.items()
        if name in actual and actual[name] != dtype
    ]
    order = list(actual) != list(expected) and not (missing or extra)
    parts = []
    if missing:
        parts.append(f"missing {missing}")
    if extra:
        parts.append(f"unexpected {extra}")
    if wrong:
        parts.append("dtypes " + "; ".join(wrong))
    if order:
        parts.append(f"order {list(actual)}")
    raise SchemaMismatch(", ".join(parts))


def empty(schema: pl.Schema) -> pl.DataFrame:
    """An empty frame of `schema`."""
    return pl.DataFrame(schema=schema)
