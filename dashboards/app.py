"""seamwatch dashboard: `streamlit run dashboards/app.py` (through `seamwatch dashboard`).

The pages live in `dashboards/app_pages/`; the input comes from `SEAMWATCH_DASHBOARD_PATH`
(`dashboards.launch`). Only this package imports streamlit (STYLE.md item 1).
"""

from __future__ import annotations

from pathlib import Path

# Imported whole before any page runs: altair finds pandas through `sys.modules`, so a chart
# drawn on one session's thread while another thread was still importing pandas met a
# partially initialized module (an error box on a page opened right after the start).
import pandas  # noqa: F401
import streamlit as st

from dashboards import charts, data, views  # noqa: F401  (charts: altair, and its imports)

# A local favicon: for a material or emoji icon the browser would fetch the image from Google or
# jsDelivr, and the dashboard must not call out.
st.set_page_config(
    page_title="seamwatch", page_icon=str(Path(__file__).with_name("icon.png")), layout="wide"
)

pages = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("app_pages/findings.py", title="Findings", icon=":material/report:"),
    st.Page("app_pages/timeline.py", title="Session timeline", icon=":material/timeline:"),
    st.Page("app_pages/live.py", title="Live", icon=":material/sensors:"),
]
page = st.navigation(pages)
with st.sidebar:
    st.text("seamwatch")
    source = data.source()
    views.text(f"Input: {views.described(source)}" if source else "No input")
page.run()
