"""The finding-text pieces detectors share (analyzer/wording.py)."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from analyzer.wording import OPENER, json_number, or_unknown, pick, seconds, text


def test_json_number_writes_whole_floats_as_integers() -> None:
    frame = pl.DataFrame({"x": [6.0, 0.25, -3.0]})
    assert frame.select(json_number("x")).to_series().to_list() == ["6", "0.25", "-3"]


def test_opener_names_the_request_or_nothing_for_a_get_stream() -> None:
    frame = pl.DataFrame({"request_method": ["tools/call", None], "request_id": ["3", None]})
    assert frame.select(OPENER).to_series().to_list() == ["tools/call request 3", None]


def test_pick_takes_the_first_branch_that_holds() -> None:
    frame = pl.DataFrame({"a": [True, False, False], "b": [True, True, False]})
    text = pick((pl.col("a"), "first"), (pl.col("b"), "second"), otherwise="neither")
    assert frame.select(text).to_series().to_list() == ["first", "second", "neither"]


def test_seconds_to_one_decimal() -> None:
    frame = pl.DataFrame({"d": [dt.timedelta(milliseconds=12345), dt.timedelta(0)]})
    assert frame.select(seconds(pl.col("d"))).to_series().to_list() == ["12.3", "0.0"]


def test_text_fills_named_placeholders_from_columns_and_keywords() -> None:
    frame = pl.DataFrame({"stream_id": ["s1", "s2"], "n": [3, None]})
    line = text("stream {stream_id}: {count} event(s) ({label})", count="n", label=pl.lit("x"))
    assert frame.select(line).to_series().to_list() == ["stream s1: 3 event(s) (x)", None]


def test_text_builds_the_same_text_as_the_positional_format() -> None:
    frame = pl.DataFrame({"a": ["1", None], "b": [2, 3]})
    named = text("{a} and {b} or {c}", c=pl.col("b") * 2)
    positional = pl.format("{} and {} or {}", "a", "b", pl.col("b") * 2)
    assert frame.select(named).equals(frame.select(positional))


def test_text_keeps_doubled_braces_literal() -> None:
    frame = pl.DataFrame({"id": ["7"]})
    line = text('data {{"id": {id}}} and {{}}')
    assert frame.select(line).item() == 'data {"id": 7} and {}'


def test_text_names_a_missing_column() -> None:
    frame = pl.DataFrame({"id": ["7"]})
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match="replica"):
        frame.select(text("event {id} on replica {replica}"))


@pytest.mark.parametrize("template", ["{}", "{0}", "{a.b}", "{a!r}", "{a:>3}"])
def test_text_refuses_a_placeholder_that_is_not_a_name(template: str) -> None:
    with pytest.raises(ValueError, match="not a plain name"):
        text(template)


def test_text_names_a_keyword_the_template_does_not_use() -> None:
    with pytest.raises(ValueError, match="replica"):
        text("event {id}", replica="replica_name")


def test_or_unknown_fills_nulls_only() -> None:
    frame = pl.DataFrame({"replica": ["r1", None]})
    assert frame.select(or_unknown("replica")).to_series().to_list() == ["r1", "unknown"]
