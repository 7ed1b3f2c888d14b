"""Findings: a filterable table; the selected finding's detail and the evidence it names."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

import polars as pl
import streamlit as st

from analyzer.findings import Severity
from dashboards import charts, data, views

source, sig = views.require_source()
found = data.findings(source, sig)

st.title("Findings")
if not found.height:
    st.success("No findings on this input.")
    st.stop()

# ---- filters ---------------------------------------------------------------------------------
cols = st.columns([3, 2, 3])
detector_ids = sorted(found["detector"].unique().to_list())
chosen_detectors = cols[0].multiselect("Detector", detector_ids, key="f_detector")
levels = [s.value for s in reversed(Severity)]
chosen_levels = cols[1].multiselect("Severity", levels, key="f_severity")
session_ids = sorted(found["session"].drop_nulls().unique().to_list())
chosen_sessions = cols[2].multiselect(
    "Session", session_ids, format_func=views.label, key="f_session"
)

shown = found
if chosen_detectors:
    shown = shown.filter(pl.col("detector").is_in(chosen_detectors))
if chosen_levels:
    shown = shown.filter(pl.col("severity").cast(pl.String).is_in(chosen_levels))
if chosen_sessions:
    shown = shown.filter(pl.col("session").is_in(chosen_sessions))
times: list[datetime] = sorted(found["first_ts"].drop_nulls().to_list())
if times and (times[-1] - times[0]).total_seconds() >= 0.001:
    low, high = st.slider(
        "First evidence between (UTC)",
        min_value=times[0],
        max_value=times[-1],
        value=(times[0], times[-1]),
        step=timedelta(milliseconds=1),
        format="HH:mm:ss.SSS",
        key="f_time",
    )
    shown = shown.filter(pl.col("first_ts").is_null() | pl.col("first_ts").is_between(low, high))

st.text(f"{shown.height} of {found.height} findings")
table = shown.select(
    pl.col("severity").cast(pl.String),
    "detector",
    "session",
    pl.col("first_ts").alias("first (UTC)"),
    pl.col("last_ts").alias("last (UTC)"),
    "title",
    "fingerprint",
)
fingerprints = table["fingerprint"].to_list()
wanted = st.query_params.get("finding")  # a link to one finding
# The table's selection is a row number, which Streamlit keeps for a keyed table across a
# change of its rows: after a filter, row 3 would name another finding. So the key names the
# rows shown (a new set of rows starts a new selection) and the finding picked last is kept by
# its fingerprint, and selected again when it is still shown.
shown_key = hashlib.sha256("\n".join(fingerprints).encode()).hexdigest()[:16]
default = views.pick(fingerprints, [], st.session_state.get("f_picked"), wanted)
picked = views.table(
    table,
    on_select="rerun",
    selection_mode="single-row",
    selection_default={
        "selection": {"rows": [] if default is None else [fingerprints.index(default)]}
    },
    key=f"findings_table:{shown_key}",
    column_config={
        "first (UTC)": st.column_config.DatetimeColumn(format="HH:mm:ss.SSS"),
        "last (UTC)": st.column_config.DatetimeColumn(format="HH:mm:ss.SSS"),
        "fingerprint": None,
    },
)

# ---- the selected finding --------------------------------------------------------------------
rows = list(picked.selection.rows) if picked is not None else []
fingerprint = views.pick(fingerprints, rows, st.session_state.get("f_picked"), wanted)
if fingerprint is None:
    st.stop()
if rows:
    st.session_state["f_picked"] = fingerprint
else:
    st.caption("Select a row to see its evidence.")

proof = data.evidence(source, sig, fingerprint)
finding = proof.finding
st.divider()
head = st.columns([6, 2])
with head[0]:
    st.subheader(str(finding["detector"]))
    views.severity_badge(str(finding["severity"]))
    views.text(str(finding["title"]))
with head[1]:
    if finding["session"] is not None and st.button("Open in session timeline", key="to_timeline"):
        st.switch_page(
            "app_pages/timeline.py",
            query_params={"session": str(finding["session"]), "finding": fingerprint},
        )
facts = {
    "session": finding["session"],
    "era": finding["era"],
    "first evidence (UTC)": None if finding["first_ts"] is None else str(finding["first_ts"]),
    "last evidence (UTC)": None if finding["last_ts"] is None else str(finding["last_ts"]),
    "fingerprint": fingerprint,
}
views.facts(facts)
views.text(str(finding["detail"]))
with st.expander("Evidence ids", expanded=False):
    views.facts(
        {k: list(finding[k]) for k in ("flow_ids", "stream_ids", "event_ids", "request_ids")}
    )


lane_of: dict[str, str] = {}
if finding["session"] is not None:
    lanes = charts.lanes(data.session_view(source, sig, str(finding["session"])))
    lane_of = dict(zip(lanes["stream_id"].to_list(), lanes["lane"].to_list(), strict=True))


def lane(stream_id: object) -> str:
    """The timeline's lane label of a stream ("S1 POST tools/call id 4 · replica-a")."""
    return lane_of.get(str(stream_id), "no stream") if stream_id is not None else "no stream"


def occurrence_label(row: dict[str, object]) -> str:
    """Where an event was seen: stream, incarnation, replica, time and flow."""
    return (
        f"event {row['event_id']} on {lane(row['stream_id'])}\n"
        f"incarnation {row['incarnation']} · replica {row['replica'] or 'unknown'} · "
        f"{row['ts']:%H:%M:%S.%f} UTC\nflow {row['flow_id']}"
    )


def side_by_side(rows: list[dict[str, object]]) -> None:
    """Event occurrences in columns, each with its payload."""
    for start in range(0, len(rows), 3):
        chunk = rows[start : start + 3]
        for col, row in zip(st.columns(len(chunk)), chunk, strict=True):
            with col, st.container(border=True):
                views.text(occurrence_label(row))
                if row["id_only"]:
                    st.text("(id-only priming event: no payload)")
                else:
                    views.payload(proof.texts.get(str(row["data_hash"])))


detector = finding["detector"]
events = proof.events
if detector == "duplicate-event-id" and events.height:
    st.subheader("The payloads issued under one id, side by side")
    for event_id in finding["event_ids"]:
        same = events.filter((pl.col("event_id") == event_id) & ~pl.col("id_only"))
        distinct = same.unique("payload_hash", keep="first", maintain_order=True)
        views.text(f"event id {event_id}: {same.height} issue(s), {distinct.height} payload(s)")
        side_by_side(list(distinct.iter_rows(named=True)))
elif detector == "causal-gap" and events.height:
    st.subheader("The missing events")
    st.text("The events the finding names, as the stream carried them (or owed them):")
    side_by_side(list(events.iter_rows(named=True)))
elif events.height:
    st.subheader("Events named")
    side_by_side(list(events.iter_rows(named=True)))

if proof.calls.height:
    if proof.calls.height > 1:
        st.subheader("The calls")
    else:
        st.subheader("The call")
    calls = list(proof.calls.iter_rows(named=True))
    for col, call in zip(st.columns(len(calls[:3])), calls[:3], strict=True):
        with col, st.container(border=True):
            views.text(
                f"request {call['request_id']}: tools/call {call['tool_name']}\n"
                f"on {lane(call['stream_id'])} · {call['ts']:%H:%M:%S.%f} UTC\n"
                f"flow {call['flow_id']}"
            )
            if not call["result_delivered"]:
                result = "its result never reached the client"
            elif call["result_ts"] is None:
                result = "result delivered"
            else:
                result = f"result delivered at {call['result_ts']:%H:%M:%S.%f} UTC"
            hints = [
                name
                for name, on in (
                    ("MRTR leg", call["mrtr"]),
                    ("read-only", call["read_only_hint"]),
                    ("idempotent", call["idempotent_hint"]),
                )
                if on
            ]
            st.text(
                f"first exchange: {call['first_outcome']} · {result}"
                + (f" · {', '.join(hints)}" if hints else "")
            )
            views.payload(proof.texts.get(str(call["request_body_hash"])), label="request")
            if call["result_data_hash"] is not None:
                views.payload(proof.texts.get(str(call["result_data_hash"])), label="result")

if proof.between.height:
    title = (
        "What happened between the calls"
        if detector == "repeated-tool-call"
        else "What happened from the first to the last evidence"
    )
    st.subheader(title)
    first = proof.between["ts"].min()
    views.table(
        proof.between.select(
            ((pl.col("ts") - first).dt.total_microseconds() / 1000).alias("+ms"),
            "what",
            pl.col("stream_id")
            .map_elements(lane, return_dtype=pl.String)
            .fill_null("no stream")
            .alias("stream"),
            "incarnation",
            "replica",
            "event_id",
            "rpc_id",
            "detail",
            "flow_id",
        ),
        key="between",
        column_config={"+ms": st.column_config.NumberColumn(format="%.3f")},
    )

if proof.incarnations.height:
    st.subheader("Incarnation chain of the named streams")
    views.table(
        proof.incarnations.select(
            pl.col("stream_id")
            .map_elements(lane, return_dtype=pl.String)
            .fill_null("no stream")
            .alias("stream"),
            "incarnation",
            "cursor",
            "replica",
            "status",
            "events",
            "payload_events",
            "first_event_id",
            "last_cursor",
            "end_how",
            "delivered_response",
            "flow_id",
        ),
        key="incarnations",
    )
if proof.resumptions.height:
    st.subheader("Resumptions")
    views.table(
        proof.resumptions.select(
            "ts",
            "cursor",
            "status",
            "cursor_replica",
            "answer_replica",
            "answer_status",
            "events_after",
            "answer_events",
            "answer_payload_events",
            "answer_end_how",
            "flow_id",
        ),
        key="resumptions",
    )
