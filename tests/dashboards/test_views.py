"""dashboards.views and the rule it states: wire text is shown only as inert text.

A static check over every dashboard module: no `unsafe_allow_html`, no HTML or markdown writers
(`st.markdown`, `st.write`, `st.html`, components), and the elements that render their text as
markdown (titles, captions, alerts, badges, metric labels, expanders...) get a literal string or
one of the few expressions listed below, each shown to hold registry words only. The browser
test proves the same on a planted capture at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest

from dashboards import views

ROOT = Path(__file__).resolve().parents[2] / "dashboards"
SOURCES = sorted(ROOT.rglob("*.py"))

FORBIDDEN = {"markdown", "write", "html", "write_stream", "latex"}
MARKDOWN_FIRST_ARG = {
    "title",
    "header",
    "subheader",
    "caption",
    "info",
    "warning",
    "error",
    "success",
    "toast",
    "badge",
    "metric",
    "expander",
    "button",
    "toggle",
    "checkbox",
    "radio",
    "selectbox",
    "multiselect",
    "slider",
    "segmented_control",
    "page_link",
}
#: Receivers whose methods are not Streamlit elements (Polars, Altair, our own modules...).
NOT_STREAMLIT = {"pl", "alt", "json", "views", "data", "charts", "ast", "os", "Path"}
#: Non-literal markdown arguments that hold registry words only, and why (as `ast.unparse`
#: writes them).
ALLOWED = {
    # detector ids match `[a-z][a-z0-9]*(-[a-z0-9]+)*` (analyzer.detectors.Detector)
    "str(finding['detector'])",
    # analyzer.findings.Severity names
    "level.value.capitalize()",
    "severity.upper()",
    # one of two literal headings chosen above it
    "title",
    # a page-made label: "<n> marks: choose a window ..."
    "f'{points.height:,} marks: choose a window (wire order) of at most {MAX_POINTS:,}'",
}


def calls(path: Path) -> list[tuple[str, ast.Call]]:
    """Every `st.<name>(...)` / `<column>.<name>(...)` call in a module, by attribute name."""
    tree = ast.parse(path.read_text("utf-8"))
    return [
        (node.func.attr, node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_html_and_no_markdown_of_data(path: Path) -> None:
    source = path.read_text("utf-8")
    assert "streamlit.components" not in source and "components.v1" not in source
    for name, call in calls(path):
        assert all(k.arg != "unsafe_allow_html" for k in call.keywords), (
            f"{path.name}:{call.lineno}"
        )
        receiver = ast.unparse(call.func.value)  # type: ignore[attr-defined]
        if receiver.split(".")[0].split("(")[0] in NOT_STREAMLIT:
            continue
        assert name not in FORBIDDEN, f"{path.name}:{call.lineno}: {receiver}.{name}"
        if name in MARKDOWN_FIRST_ARG and call.args:
            first = call.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            text = ast.unparse(first)
            assert literal or text in ALLOWED, f"{path.name}:{call.lineno}: {name}({text})"


def test_payload_pretty_prints_json_and_keeps_other_text_verbatim() -> None:
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        from dashboards import views

        views.payload('{"b":1,"a":"<img src=x>"}')
        views.payload("not json <script>x</script>")
        views.payload(None, label="empty")

    at = AppTest.from_function(script).run()
    assert not at.exception
    assert at.code[0].language == "json"
    assert at.code[0].value == '{\n  "b": 1,\n  "a": "<img src=x>"\n}'
    assert at.code[1].value == "not json <script>x</script>"
    assert [t.value for t in at.text] == ["empty", "(no payload)"]


def test_counts_by() -> None:
    findings = pl.DataFrame(
        {"detector": ["a", "b", "a"], "severity": ["high", "low", "high"]},
    )
    got = views.counts_by(findings, "detector", "severity")
    assert got.rows() == [("a", "high", 2), ("b", "low", 1)]
    empty = views.counts_by(findings.clear(), "detector")
    assert empty.columns == ["detector", "findings"] and empty.height == 0


def test_pick_prefers_the_selected_row_then_the_earlier_pick_then_the_link() -> None:
    keys = ["a", "b", "c"]
    assert views.pick(keys, [2], "a", "b") == "c"
    assert views.pick(keys, [], "b", "c") == "b"
    assert views.pick(keys, [], "gone", "c") == "c"
    assert views.pick(keys, [7], "gone", "gone") == "a"  # a row number past the table: ignored
    assert views.pick([], [], "a", "b") is None
