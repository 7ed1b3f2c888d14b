"""Rendering shared by the pages, with one rule: captured text is shown only as inert text.

Anything that came off the wire (payloads, session ids, tool names, and finding titles and
details, which quote them) goes through `st.text`, `st.code`, `st.json` or `st.dataframe`, never
markdown and never `unsafe_allow_html`: a payload such as `<img src=x onerror=...>` or a
markdown image that would fetch a URL must stay characters on the screen. Controls and bidi
overrides in it are shown as U+FFFD (`analyzer.inert`): the browser would hide the one and let the
other reorder what is shown, so that an id reads as another. `text`, `label`, `facts`, `payload`
and `table` apply that; a page shows captured text through them.
"""

from __future__ import annotations

import json
from typing import Any, Final

import polars as pl
import streamlit as st

from analyzer.inert import escape_json, inert, inert_frame
from analyzer.ingest import IngestError
from dashboards import data

__all__ = [
    "SEVERITY_COLOR",
    "counts_by",
    "described",
    "facts",
    "label",
    "payload",
    "pick",
    "require_source",
    "severity_badge",
    "table",
    "text",
]

SEVERITY_COLOR: Final = {"high": "red", "medium": "orange", "low": "yellow", "info": "gray"}


def require_source() -> tuple[data.Source, data.Signature]:
    """The inputs and their signature, or a note saying what to do (and stop the page)."""
    source = data.source()
    if source is None:
        st.info("No input: start the dashboard on a capture, e.g. `seamwatch dashboard capture/`.")
        st.stop()
    try:
        sig = data.signature(source)
        if sig:
            data.check_readable(source, sig)
    except IngestError as e:
        st.warning("The input has nothing to read yet (or cannot be read):")
        text(str(e))
        st.stop()
    if not sig:
        st.warning("The input has no capture files yet.")
        st.stop()
    return source, sig


def described(source: data.Source) -> str:
    """The inputs as one line: "capture/" or "capture-a/ + capture-b/ (2 inputs, merged)"."""
    if len(source) == 1:
        return source[0]
    return f"{' + '.join(source)} ({len(source)} inputs, merged)"


def pick(keys: list[str], rows: list[int], previous: str | None, wanted: str | None) -> str | None:
    """The item a single-row table shows the detail of: the selected row's key; else the item
    picked before, or the one a link asked for, while the table still shows it; else the first.
    """
    selected = [keys[r] for r in rows if 0 <= r < len(keys)]
    if selected:
        return selected[0]
    for key in (previous, wanted):
        if key is not None and key in keys:
            return key
    return keys[0] if keys else None


def severity_badge(severity: str) -> None:
    """A coloured badge for a severity name (one of the analyzer's four)."""
    st.badge(severity.upper(), color=SEVERITY_COLOR.get(severity, "gray"))  # type: ignore[arg-type]


def label(value: object) -> str:
    """Captured text as an option label (a select box's `format_func`)."""
    return inert(str(value))


def text(value: str) -> None:
    """Captured text (or a line quoting it) as `st.text`."""
    st.text(inert(value, lines=True))


def facts(value: dict[str, Any]) -> None:
    """A JSON view of named facts: strings, numbers, None and lists of them (a finding's ids)."""
    st.json({name: _inert_json(v) for name, v in value.items()}, expanded=True)


def _inert_json(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value, lines=True)
    if isinstance(value, list | tuple):
        return [_inert_json(v) for v in value]
    return value


def payload(text: str | None, *, label: str | None = None) -> None:
    """A payload as a code block: JSON pretty-printed (acting characters as their `\\u`
    escapes), anything else verbatim but for those characters."""
    if label is not None:
        st.text(label)
    if text is None:
        st.text("(no payload)")
        return
    try:
        pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        st.code(inert(text, lines=True), language=None, wrap_lines=True)
    else:
        st.code(escape_json(pretty), language="json", wrap_lines=True)


def table(frame: pl.DataFrame, *, key: str, **options: Any) -> Any:
    """`st.dataframe` without the index, times to the millisecond (UTC), "—" for missing."""
    config = {
        name: st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss.SSS")
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.Datetime)
    }
    config.update(options.pop("column_config", None) or {})
    return st.dataframe(
        inert_frame(frame),
        hide_index=True,
        key=key,
        placeholder="—",
        column_config=config,
        **options,
    )


def counts_by(findings: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """Findings counted by these columns, largest first."""
    if not findings.height:
        return pl.DataFrame(schema={**{c: pl.String for c in columns}, "findings": pl.UInt32})
    return (
        findings.with_columns(pl.col(c).cast(pl.String) for c in columns)
        .group_by(columns)
        .agg(pl.len().alias("findings"))
        .sort(["findings", *columns], descending=[True, *([False] * len(columns))])
    )
