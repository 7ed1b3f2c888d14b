"""analyzer.schema: declared once, asserted, and preserved through the Parquet cache."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analyzer import schema as S

KEYS = ("session_id", "stream_id", "ts", "seq")


@pytest.mark.parametrize("name", sorted(S.TIMELINE_FRAMES))
def test_key_columns_come_first_in_order(name: str) -> None:
    columns = S.TIMELINE_FRAMES[name].names()
    present = [key for key in KEYS if key in columns]
    assert columns[: len(present)] == present


def test_assert_schema_accepts_exact_schema() -> None:
    S.assert_schema(S.empty(S.STREAMS), S.STREAMS)
    S.assert_schema(S.empty(S.STREAMS).lazy(), S.STREAMS)


def test_assert_schema_names_every_difference() -> None:
    frame = S.empty(S.STREAMS).drop("kind").with_columns(pl.lit(1).alias("extra"))
    frame = frame.with_columns(pl.col("seq").cast(pl.Int32))
    with pytest.raises(S.SchemaMismatch) as e:
        S.assert_schema(frame, S.STREAMS)
    text = str(e.value)
    assert "missing ['kind']" in text
    assert "unexpected ['extra']" in text
    assert "seq: Int32 != Int64" in text


def test_assert_schema_checks_order() -> None:
    frame = S.empty(S.STREAMS)
    with pytest.raises(S.SchemaMismatch, match="order"):
        S.assert_schema(frame.select(reversed(frame.columns)), S.STREAMS)


@pytest.mark.parametrize(
    "table", [S.RAW_FLOWS, S.RAW_EVENTS, S.RAW_MESSAGES, S.RAW_TOOLS, S.PAYLOADS]
)
def test_normalized_tables_round_trip_through_parquet(tmp_path: Path, table: pl.Schema) -> None:
    path = tmp_path / "t.parquet"
    S.empty(table).write_parquet(path)
    S.assert_schema(pl.scan_parquet(path), table)
    S.assert_schema(pl.scan_parquet(path, schema=table), table)


def test_enums_keep_their_domain_through_parquet(tmp_path: Path) -> None:
    frame = pl.DataFrame({"kind": ["post", "get"]}, schema={"kind": S.STREAM_KIND})
    frame.write_parquet(tmp_path / "k.parquet")
    back = pl.read_parquet(tmp_path / "k.parquet")
    assert back.schema["kind"] == S.STREAM_KIND
