"""Session timeline: one lane per logical stream, events in wire order, resumes and findings."""

from __future__ import annotations

from typing import Final

import polars as pl
import streamlit as st

from dashboards import charts, data, views

#: Marks drawn at most; above that the page asks for a narrower window.
MAX_POINTS: Final = 4000

source, sig = views.require_source()
found = data.findings(source, sig)
sessions = data.sessions(source, sig)

st.title("Session timeline")
if not sessions.height:
    st.info("No sessions in this input.")
    st.stop()

per_session = views.counts_by(found.filter(pl.col("session").is_not_null()), "session")
counts = dict(per_session.iter_rows())
position = {s: i for i, s in enumerate(sessions["session_id"].to_list())}
ordered = sorted(position, key=lambda s: (-counts.get(s, 0), position[s]))
wanted = st.query_params.get("session")
cols = st.columns([4, 2])
session_id = cols[0].selectbox(
    "Session",
    ordered,
    index=ordered.index(wanted) if wanted in ordered else 0,
    format_func=lambda s: views.label(f"{s} · {counts.get(s, 0)} finding(s)"),
    key="t_session",
)
spacing = cols[1].segmented_control(
    "Spacing",
    ["wire order", "time"],
    default="wire order",
    key="spacing",
    bind="query-params",
    help="wire order spaces marks evenly in the order they passed the proxy; time is to scale",
)
view = data.session_view(source, sig, session_id)
own = found.filter(pl.col("session") == session_id)

highlight_options = ["all", *own["fingerprint"].to_list()]
labels = {
    row["fingerprint"]: views.label(f"{row['severity']} · {row['detector']} · {row['title']}")
    for row in own.iter_rows(named=True)
}
wanted_finding = st.query_params.get("finding")
highlight = st.selectbox(
    "Highlight the evidence of",
    highlight_options,
    index=highlight_options.index(wanted_finding) if wanted_finding in highlight_options else 0,
    format_func=lambda f: "every finding of this session" if f == "all" else labels[f],
    key="t_highlight",
)
named = own if highlight == "all" else own.filter(pl.col("fingerprint") == highlight)

session = view.session
facts = st.columns(6)
facts[0].metric("Streams", view.streams.height)
facts[1].metric("Incarnations", view.incarnations.height)
facts[2].metric("Resumptions", view.resumptions.height)
facts[3].metric("Tool calls", view.tool_calls.height)
facts[4].metric("SSE events", view.events.height)
facts[5].metric("Findings", own.height)
views.text(
    f"era {session.get('era')} · client {session.get('client_ip')} "
    f"{session.get('client_info') or ''} · started {session.get('start')} · "
    f"ended by {session.get('end_how') or 'nothing captured'}"
)

layers = charts.marks(view, named)
points = layers["points"]
if points.height > MAX_POINTS:
    lo, hi = int(points["order"].min()), int(points["order"].max())  # type: ignore[arg-type]
    window = st.slider(
        f"{points.height:,} marks: choose a window (wire order) of at most {MAX_POINTS:,}",
        min_value=lo,
        max_value=hi,
        value=(lo, min(hi, lo + MAX_POINTS)),
        key="t_window",
    )
    layers = charts.window(layers, *window)
chart = charts.timeline_chart(layers, spacing="time" if spacing == "time" else "wire order")
state = st.altair_chart(chart, on_select="rerun", selection_mode="pick", key="t_chart")
st.caption(
    "Drag to pan, scroll to zoom, double-click to reset. Bars: incarnations (colour: replica); "
    "ticks: stream ends (red: broken); dashed: a resume from its cursor to what answered it; "
    "red rings: events and requests a finding names. Click a mark to see its payload."
)

# ---- the payload of a mark -------------------------------------------------------------------
picked_keys = [p.get("key") for p in (state.selection.get("pick") or [])] if state else []
shown_points = layers["points"].sort("order")
choices = shown_points["key"].to_list()
if picked_keys and picked_keys[0] in choices:
    st.session_state["t_mark"] = picked_keys[0]
describe = {
    row["key"]: views.label(
        f"{row['lane']} · {row['what']} · "
        + (f"id {row['event_id']} · " if row["event_id"] else "")
        + (row["method"] or (f"JSON-RPC id {row['rpc_id']}" if row["rpc_id"] else ""))
    )
    for row in shown_points.iter_rows(named=True)
}
if choices:
    default_key = next(
        (k for k, n in zip(choices, shown_points["named"].to_list(), strict=True) if n),
        choices[0],
    )
    if st.session_state.get("t_mark") not in choices:
        st.session_state["t_mark"] = default_key
    mark = st.selectbox("Payload of", choices, format_func=describe.__getitem__, key="t_mark")
    row = shown_points.filter(pl.col("key") == mark).row(0, named=True)
    if row["findings"]:
        st.text(f"named by: {row['findings']}")
    text = data.payload_texts(source, sig, (row["data_hash"],)) if row["data_hash"] else {}
    views.payload(text.get(row["data_hash"]) if row["data_hash"] else None)

# ---- the frames behind the chart ---------------------------------------------------------------
lanes = charts.lanes(view)
with st.expander("Streams", expanded=True):
    views.table(
        view.streams.join(lanes, on="stream_id", how="left").select(
            "lane",
            "kind",
            "request_id",
            "request_method",
            "incarnations",
            "events",
            "payload_events",
            "response_delivered",
            "last_end_how",
            "stale_cursor",
            "stream_id",
        ),
        key="t_streams",
    )
with st.expander("Resumptions", expanded=view.resumptions.height > 0):
    views.table(
        view.resumptions.select(
            "ts",
            "cursor",
            "status",
            "cursor_session_id",
            "cursor_replica",
            "answer_replica",
            "replica_changed",
            "answer_status",
            "events_after",
            "answer_events",
            "response_owed",
            "flow_id",
        ),
        key="t_resumptions",
    )
with st.expander("Tool calls", expanded=view.tool_calls.height > 0):
    views.table(
        view.tool_calls.select(
            "ts",
            "request_id",
            "tool_name",
            "first_outcome",
            "result_delivered",
            "result_incarnation",
            "result_ts",
            "mrtr",
            "read_only_hint",
            "idempotent_hint",
            "flow_id",
        ),
        key="t_calls",
    )
with st.expander("Findings of this session", expanded=False):
    views.table(
        own.select(pl.col("severity").cast(pl.String), "detector", "title", "first_ts"),
        key="t_findings",
    )
