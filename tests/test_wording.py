"""The finding-text pieces detectors share (analyzer/wording.py)."""

from __future__ import annotations

import datetime as dt

import polars as pl

from analyzer.wording import OPENER, json_number, pick, seconds


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
