"""analyzer.inert: acting characters replaced for display; JSON text kept the same JSON."""

from __future__ import annotations

import json
import re

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from analyzer.inert import LINES, ONE_LINE, escape_json, inert, inert_frame

HOSTILE = "a\x1b[2J\x07b\u202ec\u2066d\x9be\x7f\tf\ng\rh"


def test_inert_replaces_controls_and_bidi_overrides() -> None:
    assert inert(HOSTILE) == "a\ufffd[2J\ufffdb\ufffdc\ufffdd\ufffde\ufffd\ufffdf\ufffdg\ufffdh"
    assert inert(HOSTILE, lines=True) == "a\ufffd[2J\ufffdb\ufffdc\ufffdd\ufffde\ufffd\tf\ng\rh"
    assert inert("plain · text → ünïcode 𝄞") == "plain · text → ünïcode 𝄞"


def test_the_patterns_mean_the_same_to_polars() -> None:
    frame = pl.DataFrame({"s": [HOSTILE, None], "l": [[HOSTILE], None], "n": [1, 2]})
    shown = inert_frame(frame)
    assert shown["s"].to_list() == [inert(HOSTILE, lines=True), None]
    assert shown["l"].to_list() == [[inert(HOSTILE, lines=True)], None]
    assert shown["n"].to_list() == [1, 2]
    one_line = frame["s"].str.replace_all(ONE_LINE, "\ufffd")
    assert one_line.to_list() == [inert(HOSTILE), None]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_escape_json_keeps_the_value_and_shows_no_acting_character(value: object) -> None:
    text = escape_json(json.dumps(value, indent=2, ensure_ascii=False))
    assert json.loads(text) == value
    assert re.search(LINES, text) is None
