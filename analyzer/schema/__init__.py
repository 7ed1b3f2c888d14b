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
(derived ones too) in `timeline`; all are named here.
"""

from __future__ import annotations

import polars as pl

from analyzer.schema.dtypes import (
    CURSOR_STATUS,
    DIRECTION,
    END_HOW,
    INT32_END,
    INT64_END,
    OUTCOME,
    RPC_KIND,
    SESSION_END,
    SESSION_KIND,
    SOURCE,
    STREAM_KIND,
    TS,
)
from analyzer.schema.tables import (
    PAYLOADS,
    RAW_EVENTS,
    RAW_FLOWS,
    RAW_MESSAGES,
    RAW_TABLES,
    RAW_TOOLS,
)
from analyzer.schema.timeline import (
    AFTER_CURSOR,
    EVENT_DATES,
    EXCHANGES,
    ID_COUNTERS,
    INCARNATIONS,
    MESSAGES,
    PLACEMENT,
    PROGRESS,
    RECURRING_EVENTS,
    REPLAY_MESSAGES,
    RESUMED_EVENTS,
    RESUMED_PROGRESS,
    RESUMES_AT_CURSOR,
    RESUMPTIONS,
    RPC_MESSAGES,
    SESSIONS,
    SSE_EVENTS,
    STREAMS,
    TIMELINE_FRAMES,
    TOOL_CALLS,
)

__all__ = [
    "AFTER_CURSOR",
    "CURSOR_STATUS",
    "DIRECTION",
    "END_HOW",
    "EVENT_DATES",
    "EXCHANGES",
    "ID_COUNTERS",
    "INCARNATIONS",
    "INT32_END",
    "INT64_END",
    "MESSAGES",
    "OUTCOME",
    "PAYLOADS",
    "PLACEMENT",
    "PROGRESS",
    "RAW_EVENTS",
    "RAW_FLOWS",
    "RAW_MESSAGES",
    "RAW_TABLES",
    "RAW_TOOLS",
    "RECURRING_EVENTS",
    "REPLAY_MESSAGES",
    "RESUMED_EVENTS",
    "RESUMED_PROGRESS",
    "RESUMES_AT_CURSOR",
    "RESUMPTIONS",
    "RPC_KIND",
    "RPC_MESSAGES",
    "SESSIONS",
    "SESSION_END",
    "SESSION_KIND",
    "SOURCE",
    "SSE_EVENTS",
    "STREAMS",
    "STREAM_KIND",
    "TIMELINE_FRAMES",
    "TOOL_CALLS",
    "TS",
    "SchemaMismatch",
    "assert_schema",
    "empty",
]


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
