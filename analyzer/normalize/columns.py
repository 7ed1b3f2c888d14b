"""Column builders: the normalizer's column lists and row tuples, flushed to DataFrames of the
`analyzer.schema` tables, and `NormalizedFrames`, the tables of some records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from analyzer import schema as S


def table_frame(schema: pl.Schema, columns: Iterable[Sequence[Any]]) -> pl.DataFrame:
    series = []
    for (name, dtype), values in zip(schema.items(), columns, strict=True):
        if dtype == S.TS:
            series.append(pl.Series(name, values, dtype=pl.Int64).cast(S.TS))
        elif isinstance(dtype, pl.List):
            # Nested columns arrive as JSON text (or None for empty): building them from
            # Python lists goes through a slow per-row path in Polars.
            text = pl.Series(name, values, dtype=pl.String)
            if len(text) and text.null_count() == len(text):
                # Every list empty (the usual batch): nothing to decode.
                series.append(pl.Series(name, [[]], dtype=dtype).new_from_index(0, len(text)))
            else:
                series.append(text.fill_null("[]").str.json_decode(dtype).rename(name))
        else:
            series.append(pl.Series(name, values, dtype=dtype))
    return pl.DataFrame(series)


class Columns:
    """Column lists for one table, flushed to a DataFrame of its schema."""

    __slots__ = ("cols", "schema")

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self.cols: dict[str, list[Any]] = {name: [] for name in schema}

    def __len__(self) -> int:
        return len(next(iter(self.cols.values())))

    def appenders(self) -> tuple[Callable[[Any], None], ...]:
        return tuple(column.append for column in self.cols.values())

    def frame(self) -> pl.DataFrame:
        return table_frame(self.schema, self.cols.values())

    def take(self) -> pl.DataFrame:
        frame = self.frame()
        for column in self.cols.values():
            column.clear()
        return frame


class Rows:
    """Row tuples for one table (one `append` a row: the per-event tables), as a DataFrame."""

    __slots__ = ("append", "rows", "schema")

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []
        self.append = self.rows.append

    def __len__(self) -> int:
        return len(self.rows)

    def take(self) -> pl.DataFrame:
        # Polars takes the transposed tuples as they are: no list copy of each column.
        columns: list[Sequence[Any]] = list(zip(*self.rows, strict=True)) or [
            [] for _ in self.schema
        ]
        self.rows.clear()
        return table_frame(self.schema, columns)


@dataclass(frozen=True)
class NormalizedFrames:
    """The normalized tables of some records (see `analyzer.schema`)."""

    flows: pl.DataFrame
    events: pl.DataFrame
    messages: pl.DataFrame
    tools: pl.DataFrame
    payloads: pl.DataFrame

    @staticmethod
    def concat(parts: Iterable[NormalizedFrames]) -> NormalizedFrames:
        parts = list(parts)
        tables = {}
        for name, table_schema in S.RAW_TABLES.items():
            frames = [getattr(part, name) for part in parts]
            tables[name] = pl.concat(frames) if frames else S.empty(table_schema)
        tables["payloads"] = tables["payloads"].unique(
            "data_hash", keep="first", maintain_order=True
        )
        return NormalizedFrames(**tables)


# ---------------------------------------------------------------------------------------------
# Per-flow state
