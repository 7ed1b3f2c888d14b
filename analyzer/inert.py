"""Captured text made safe to show a person: what a terminal or a browser would act on, replaced.

Server-chosen text (event ids, session ids, tool names, payloads) reaches the table report and
the dashboard. Two kinds of character in it do something instead of being shown: C0 and C1
controls (a terminal runs `ESC[2J` and `ESC]0;title BEL`; a browser shows nothing for them) and
the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which make
`p1\u202etxt.exe` read as another id ("Trojan Source"). Each becomes U+FFFD, which says that
something was there. The patterns are written so that both Python's `re` and Polars' (Rust)
regex engine read them.
"""

from __future__ import annotations

import re
from typing import Final

import polars as pl

__all__ = ["LINES", "ONE_LINE", "escape_json", "inert", "inert_frame"]

_ACTING: Final = r"\x7f-\x9f\u202a-\u202e\u2066-\u2069"
ONE_LINE: Final = rf"[\x00-\x1f{_ACTING}]"
"""Every control and bidi control: for text that must stay on one line (a terminal table)."""
LINES: Final = rf"[\x00-\x08\x0b\x0c\x0e-\x1f{_ACTING}]"
"""The same, except tab, line feed and carriage return: for text shown as a block."""

_ONE_LINE = re.compile(ONE_LINE)
_LINES = re.compile(LINES)
REPLACEMENT: Final = "\ufffd"


def inert(text: str, *, lines: bool = False) -> str:
    """`text` with each acting character replaced by U+FFFD (`lines`: keep tab, LF and CR)."""
    return (_LINES if lines else _ONE_LINE).sub(REPLACEMENT, text)


def escape_json(text: str) -> str:
    """JSON text with each acting character written as its `\\uXXXX` escape.

    Such characters can only stand inside JSON strings (JSON's own whitespace is tab, LF, CR
    and space), where the escape means the same character: the text stays the same JSON, and
    the reader sees which character it was.
    """
    return _LINES.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def inert_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with `inert(..., lines=True)` applied to every String and List(String) column."""
    replace = pl.col(pl.String).str.replace_all(LINES, REPLACEMENT)
    lists = [
        pl.col(name).list.eval(pl.element().str.replace_all(LINES, REPLACEMENT))
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.List) and dtype.inner == pl.String
    ]
    return frame.with_columns(replace, *lists)
