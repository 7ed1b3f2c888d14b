"""Overview: what was read (capture health), how much traffic, and the findings by detector."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from analyzer.findings import Severity
from dashboards import data, views

source, sig = views.require_source()
summary = data.overview(source, sig)
found = data.findings(source, sig)

st.title("Overview")
views.text(f"Input: {views.described(source)}")
if summary.first_ts is not None and summary.last_ts is not None:
    st.text(
        f"Traffic from {summary.first_ts:%Y-%m-%d %H:%M:%S.%f} to {summary.last_ts:%H:%M:%S.%f} UTC"
    )

st.subheader("Capture health")
health = st.columns(5)
health[0].metric("Records read", f"{summary.records:,}")
health[1].metric("Lines skipped", f"{summary.skipped:,}")
health[2].metric("Records lost", f"{summary.losses:,}", help="seq gaps, writer drops, chunk gaps")
health[3].metric("Unclean stops", f"{summary.unclean_stops:,}", help="runs without capture_close")
health[4].metric("Inputs", f"{summary.inputs.height:,}")
if summary.warnings:
    st.warning("The reader reported damage (the capture-health detector turns it into findings):")
    for warning in summary.warnings:
        views.text(f"• {warning}")
else:
    st.success("Read cleanly: no torn or corrupt lines, no losses, every run closed.")

st.subheader("Traffic")
traffic = st.columns(7)
traffic[0].metric("Sessions", f"{summary.sessions:,}")
traffic[1].metric("Streams", f"{summary.streams:,}", help="logical streams (POST and GET)")
traffic[2].metric("Incarnations", f"{summary.incarnations:,}", help="HTTP responses carrying them")
traffic[3].metric("Resumptions", f"{summary.resumptions:,}", help="requests with Last-Event-ID")
traffic[4].metric("Tool calls", f"{summary.tool_calls:,}")
traffic[5].metric("HTTP exchanges", f"{summary.exchanges:,}")
traffic[6].metric("SSE events", f"{summary.events:,}")

st.subheader("Findings")
by_severity = dict(views.counts_by(found, "severity").iter_rows())
levels = st.columns(5)
levels[0].metric("Findings", f"{found.height:,}")
for col, level in zip(levels[1:], reversed(Severity), strict=True):
    col.metric(level.value.capitalize(), f"{by_severity.get(level.value, 0):,}", help=level.meaning)

if found.height:
    by_detector = views.counts_by(found, "detector", "severity")
    table = (
        by_detector.pivot(on="severity", index="detector", values="findings")
        .fill_null(0)
        .with_columns(pl.sum_horizontal(pl.exclude("detector")).alias("total"))
        .sort("total", "detector", descending=[True, False])
    )
    order = [s.value for s in reversed(Severity) if s.value in table.columns]
    left, right = st.columns([2, 3])
    with left:
        views.table(table.select("detector", *order, "total"), key="by_detector")
    chart = (
        alt.Chart(by_detector)
        .mark_bar()
        .encode(
            x=alt.X("sum(findings):Q", title="findings", axis=alt.Axis(tickMinStep=1, format="d")),
            y=alt.Y("detector:N", sort="-x", title=None, axis=alt.Axis(labelLimit=240)),
            color=alt.Color(
                "severity:N",
                scale=alt.Scale(
                    domain=[s.value for s in reversed(Severity)],
                    range=["#d62728", "#ff7f0e", "#e5c100", "#9d9d9d"],
                ),
            ),
            tooltip=["detector:N", "severity:N", "findings:Q"],
        )
        .properties(height=34 * table.height + 60)
    )
    right.altair_chart(chart, key="by_detector_chart")
else:
    st.success("No findings.")

st.subheader("Inputs")
views.table(summary.inputs, key="inputs")

st.subheader("Sessions")
per_session = views.counts_by(found.filter(pl.col("session").is_not_null()), "session").rename(
    {"session": "session_id"}
)
sessions = (
    data.sessions(source, sig)
    .join(per_session, on="session_id", how="left")
    .with_columns(pl.col("findings").fill_null(0))
    .select(
        "session_id",
        "origin",
        "findings",
        "era",
        "kind",
        "client_ip",
        "client_info",
        "server",
        "start",
        "end_how",
        "flows",
        "streams",
    )
)
# The origin column only where the input reaches several (a forward proxy's capture).
if sessions["origin"].null_count() == sessions.height:
    sessions = sessions.drop("origin")
views.table(sessions, key="sessions")
