"""The session timeline chart (Altair): one lane per logical stream, marks in wire time.

Lanes: one per logical stream (POST or GET, with the replicas of its incarnations), and one for
exchanges that carried no stream (JSON answers, 202s, DELETE, 404). Layers: incarnations as
bars coloured by replica; events and messages as points; stream ends as ticks (breaks in red);
each resume as a dashed rule from the event its cursor names to the incarnation (or new stream)
that answered it; findings as red rings around the events and requests they name.

The frames come from `dashboards.data.SessionView`; nothing here decides what is a fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final, Literal

import altair as alt
import polars as pl

from analyzer.inert import inert, inert_frame
from dashboards.data import SessionView

__all__ = ["NO_STREAM", "Spacing", "lanes", "marks", "timeline_chart"]

#: Lane of the exchanges that opened no stream.
NO_STREAM: Final = "no stream (JSON, 202, DELETE…)"

Spacing = Literal["time", "wire order"]

#: Point categories, in legend order, with their colour and shape.
_CATEGORY: Final = {
    "request": ("#4c78a8", "triangle-right"),
    "tool call": ("#1f3f8f", "triangle-right"),
    "resume request": ("#9467bd", "triangle-right"),
    "priming (id only)": ("#bab0ac", "circle"),
    "notification": ("#72b7b2", "circle"),
    "server request": ("#54a24b", "circle"),
    "response": ("#f58518", "diamond"),
    "tool result": ("#e45756", "diamond"),
    "error": ("#b279a2", "diamond"),
    "other event": ("#9d755d", "circle"),
}

#: Incarnation bars, one colour per replica (pale, under the marks).
_REPLICA_COLORS: Final = ["#9ecae9", "#ffbf79", "#88d27a", "#ff9d98", "#d6a5c9", "#bab0ac"]

#: How a stream's HTTP response ended, and whether that is a break.
_BREAKS: Final = ("client_closed", "server_closed", "error", "open_at_shutdown")


def lanes(view: SessionView) -> pl.DataFrame:
    """stream_id -> lane label ("S1 POST tools/call id 4 · replica-a → replica-b")."""
    replicas = (
        view.incarnations.sort("incarnation")
        .group_by("stream_id", maintain_order=True)
        .agg(pl.col("replica").drop_nulls().unique(maintain_order=True).alias("replicas"))
    )
    streams = view.streams.join(replicas, on="stream_id", how="left").with_row_index("n", 1)
    labels = []
    for row in streams.iter_rows(named=True):
        what = str(row["kind"]).upper()
        if row["kind"] == "post":
            what += f" {row['request_method'] or 'request'}"
            if row["request_id"] is not None:
                what += f" id {row['request_id']}"
        elif row["stale_cursor"] is not None:
            what += f" (stale cursor {row['stale_cursor']})"
        else:
            what += " standalone"
        replicas_of = " → ".join(row["replicas"] or []) or "replica unknown"
        labels.append(inert(f"S{row['n']} {what} · {replicas_of}"))
    return pl.DataFrame(
        {"stream_id": streams["stream_id"], "lane": labels},
        schema={"stream_id": pl.String, "lane": pl.String},
    )


def marks(view: SessionView, findings: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The chart's layers as frames: points, bars, ends, resumes, rings (lane, t_ms, order)."""
    start = view.session.get("start") or _first_ts(view)
    lane_of = lanes(view)
    tool_ids = set(view.tool_calls["request_id"].drop_nulls().to_list())
    result_keys = {
        (row["result_flow_id"], row["request_id"])
        for row in view.tool_calls.iter_rows(named=True)
        if row["result_flow_id"] is not None
    }
    named_events, named_requests = _named(findings)

    replica_of = dict(
        zip(view.exchanges["flow_id"].to_list(), view.exchanges["replica"].to_list(), strict=True)
    )
    rows: list[dict[str, object]] = []
    for row in view.events.iter_rows(named=True):
        kind = row["rpc_kind"]
        if row["id_only"]:
            category = "priming (id only)"
        elif kind in ("response", "error"):
            category = "tool result" if (row["flow_id"], row["rpc_id"]) in result_keys else kind
        elif kind == "notification":
            category = "notification"
        elif kind == "request":
            category = "server request"
        else:
            category = "other event"
        named_by = named_events.get(row["event_id"], []) if row["event_id"] else []
        rows.append(
            {
                "ts": row["ts"],
                "stream_id": row["stream_id"],
                "flow_id": row["flow_id"],
                "incarnation": row["incarnation"],
                "replica": replica_of.get(row["flow_id"]),
                "event_id": row["event_id"],
                "method": row["rpc_method"],
                "rpc_id": row["rpc_id"],
                "data_hash": row["data_hash"],
                "category": category,
                "what": f"SSE event ({row['event'] or 'message'})",
                "findings": ", ".join(dict.fromkeys(named_by)),
            }
        )
    for row in view.exchanges.iter_rows(named=True):
        if row["last_event_id"] is not None:
            category = "resume request"
        elif row["rpc_method"] == "tools/call" and row["rpc_id"] in tool_ids:
            category = "tool call"
        else:
            category = "request"
        named_by = named_requests.get(row["rpc_id"], []) if row["rpc_id"] else []
        status = row["status"] if row["status"] is not None else "no answer"
        rows.append(
            {
                "ts": row["ts"],
                "stream_id": row["stream_id"],
                "flow_id": row["flow_id"],
                "incarnation": row["incarnation"],
                "replica": row["replica"],
                "event_id": row["last_event_id"],
                "method": row["rpc_method"],
                "rpc_id": row["rpc_id"],
                "data_hash": row["request_body_hash"],
                "category": category,
                "what": f"{row['method']} {row['path'] or ''} → {status}",
                "findings": ", ".join(dict.fromkeys(named_by)),
            }
        )
    # Answers that came as a JSON body: on their exchange's lane (no stream), at response time.
    for row in view.messages.filter(pl.col("direction") == "s2c").iter_rows(named=True):
        kind = str(row["kind"])
        is_result = (row["flow_id"], row["rpc_id"]) in result_keys
        rows.append(
            {
                "ts": row["ts"],
                "stream_id": row["stream_id"],
                "flow_id": row["flow_id"],
                "incarnation": row["incarnation"],
                "replica": replica_of.get(row["flow_id"]),
                "event_id": None,
                "method": row["method"],
                "rpc_id": row["rpc_id"],
                "data_hash": row["data_hash"],
                "category": "tool result" if is_result else _category_of(kind),
                "what": "JSON body",
                "findings": "",
            }
        )
    previews = view.previews
    for key, row in enumerate(rows):
        row["key"] = key
        row["payload"] = previews.get(str(row["data_hash"]), "") if row["data_hash"] else ""
    points = (
        pl.DataFrame(rows, schema=_POINT_SCHEMA, orient="row")
        .join(lane_of, on="stream_id", how="left")
        .with_columns(
            pl.col("lane").fill_null(NO_STREAM), (pl.col("findings") != "").alias("named")
        )
    )

    bars = view.incarnations.join(lane_of, on="stream_id", how="left").select(
        "lane",
        "stream_id",
        "flow_id",
        "incarnation",
        pl.col("replica").fill_null("unknown"),
        "cursor",
        pl.coalesce("response_ts", "ts").alias("ts"),
        pl.coalesce("end_ts", pl.lit(view.session.get("last_ts") or _last_ts(view)))
        .cast(pl.Datetime("ns", "UTC"))
        .alias("ts2"),
        pl.col("end_how").cast(pl.String).fill_null("no end recorded").alias("end_how"),
        "events",
    )
    ends = bars.filter(pl.col("end_how") != "no end recorded").select(
        "lane",
        "flow_id",
        "incarnation",
        "replica",
        pl.col("ts2").alias("ts"),
        "end_how",
        pl.col("end_how").is_in(_BREAKS).alias("break"),
    )
    resumes = (
        view.resumptions.join(
            lane_of.rename({"stream_id": "cursor_stream_id", "lane": "from_lane"}),
            on="cursor_stream_id",
            how="left",
        )
        .join(
            lane_of.rename({"stream_id": "answer_stream_id", "lane": "to_lane"}),
            on="answer_stream_id",
            how="left",
        )
        .select(
            pl.col("from_lane").fill_null(pl.col("to_lane")).fill_null(NO_STREAM).alias("lane"),
            pl.col("to_lane").fill_null(NO_STREAM),
            pl.coalesce("cursor_ts", "ts").alias("ts"),
            pl.col("ts").alias("ts2"),
            "cursor",
            pl.col("status").cast(pl.String).alias("cursor_status"),
            "cursor_replica",
            "answer_replica",
            "answer_status",
            "answer_events",
            "flow_id",
        )
    )
    frames = {"points": points, "bars": bars, "ends": ends, "resumes": resumes}
    return _place(frames, start)


_POINT_SCHEMA: Final = pl.Schema(
    {
        "ts": pl.Datetime("ns", "UTC"),
        "stream_id": pl.String(),
        "flow_id": pl.String(),
        "incarnation": pl.Int32(),
        "replica": pl.String(),
        "event_id": pl.String(),
        "method": pl.String(),
        "rpc_id": pl.String(),
        "data_hash": pl.String(),
        "category": pl.String(),
        "what": pl.String(),
        "findings": pl.String(),
        "payload": pl.String(),
        "key": pl.Int64(),
    }
)


def _category_of(kind: str) -> str:
    return {"request": "server request", "notification": "notification"}.get(
        kind, kind if kind in _CATEGORY else "other event"
    )


def _named(findings: pl.DataFrame) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """event id -> detectors naming it; request id -> detectors naming it."""
    events: dict[str, list[str]] = {}
    requests: dict[str, list[str]] = {}
    for row in findings.iter_rows(named=True):
        for key in row["event_ids"]:
            events.setdefault(key, []).append(row["detector"])
        for key in row["request_ids"]:
            requests.setdefault(key, []).append(row["detector"])
    return events, requests


def _first_ts(view: SessionView) -> datetime | None:
    return view.exchanges["ts"].min() if view.exchanges.height else None  # type: ignore[return-value]


def _last_ts(view: SessionView) -> datetime | None:
    values = [view.exchanges["end_ts"].max(), view.events["ts"].max()]
    present = [v for v in values if v is not None]
    return max(present) if present else None  # type: ignore[return-value]


#: How each layer's times map to wire order: "at" a mark's own position (the first mark at or
#: after the time), "before" the first mark at or after it, or "after" the last mark at or
#: before it (bars span their marks, ends sit right after the last mark of their response).
_SIDES: Final = {
    "bars": {"ts": "before", "ts2": "after"},
    "ends": {"ts": "after"},
    "resumes": {"ts": "at", "ts2": "at"},
}


def _place(frames: Mapping[str, pl.DataFrame], start: object) -> dict[str, pl.DataFrame]:
    """Add `t_ms` (ms since the session start), `order` (wire order) and `utc` per time column.

    Points get consecutive orders (time, then the order they were listed in: an SSE event's
    position in its response), so events that share a chunk's time still get a place each.
    """
    points = (
        frames["points"]
        .sort("ts", "key", nulls_last=True)
        .with_row_index("order")
        .with_columns(pl.col("order").cast(pl.Float64))
    )
    stamps = points["ts"]
    origin = start if isinstance(start, datetime) else (stamps.min() if len(stamps) else None)
    out = {"points": _times(points, "ts", "", origin)}
    for name, frame in frames.items():
        if name == "points":
            continue
        for column, side in _SIDES.get(name, {}).items():
            suffix = "" if column == "ts" else "2"
            values = frame[column]
            index = stamps.search_sorted(values, side="right" if side == "after" else "left")
            shift = {"at": 0.0, "before": -0.4, "after": -0.6}[side]
            order = (index.cast(pl.Float64) + shift).alias(f"order{suffix}")
            frame = _times(frame.with_columns(order), column, suffix, origin)
        out[name] = frame
    return out


def _times(frame: pl.DataFrame, column: str, suffix: str, origin: object) -> pl.DataFrame:
    """`t_ms<suffix>` and `utc<suffix>` of a time column."""
    values = frame[column]
    return frame.with_columns(
        ((values - origin).dt.total_microseconds() / 1000.0).alias(f"t_ms{suffix}"),
        values.dt.to_string("%H:%M:%S%.6f").alias(f"utc{suffix}"),
    )


def window(layers: Mapping[str, pl.DataFrame], low: float, high: float) -> dict[str, pl.DataFrame]:
    """The layers cut to the marks whose wire order is in [low, high] (long sessions)."""
    inside = pl.col("order").is_between(low, high)
    overlaps = (pl.col("order2") >= low) & (pl.col("order") <= high)
    return {
        "points": layers["points"].filter(inside),
        "ends": layers["ends"].filter(inside),
        "bars": layers["bars"].filter(overlaps),
        "resumes": layers["resumes"].filter(overlaps),
    }


def timeline_chart(
    layers: Mapping[str, pl.DataFrame], *, spacing: Spacing = "time", width: int | None = None
) -> alt.LayerChart:
    """The interactive chart: drag to pan, scroll to zoom (x), hover for ids and payload."""
    x_field, x2_field = ("t_ms", "t_ms2") if spacing == "time" else ("order", "order2")
    x_title = "ms since the session started" if spacing == "time" else "wire order"
    points, bars, ends, resumes = (layers[k] for k in ("points", "bars", "ends", "resumes"))
    lane_order = sorted(
        set(points["lane"].to_list()) | set(bars["lane"].to_list()),
        key=lambda lane: (lane == NO_STREAM, _lane_number(lane), lane),
    )
    y = alt.Y(
        "lane:N", sort=lane_order, title=None, axis=alt.Axis(labelLimit=320, labelFontSize=12)
    )
    stops = pl.concat(
        [f[c] for f in (points, ends) for c in (x_field, x2_field) if c in f.columns]
    ).drop_nulls()
    lo, hi = (float(stops.min()), float(stops.max())) if len(stops) else (0.0, 1.0)  # type: ignore[arg-type]
    pad = max((hi - lo) * 0.02, 0.5 if spacing != "time" else 0.01)
    x = alt.X(
        f"{x_field}:Q",
        title=x_title,
        axis=alt.Axis(grid=False),
        # A little room either side, so the first and last marks are not cut by the edge.
        scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False, zero=False),
    )
    zoom = alt.selection_interval(bind="scales", encodings=["x"], name="zoom")
    pick = alt.selection_point(name="pick", fields=["key"])

    bar_layer = (
        alt.Chart(_records(bars))
        .mark_bar(height=18, opacity=0.8, cornerRadius=3, clip=True)
        .encode(
            x=x,
            x2=alt.X2(f"{x2_field}:Q"),
            y=y,
            color=alt.Color(
                "replica:N",
                title="incarnation on replica",
                scale=alt.Scale(range=_REPLICA_COLORS),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                alt.Tooltip("lane:N", title="stream"),
                alt.Tooltip("incarnation:Q"),
                alt.Tooltip("replica:N"),
                alt.Tooltip("cursor:N", title="resumed from cursor"),
                alt.Tooltip("events:Q"),
                alt.Tooltip("end_how:N", title="HTTP end"),
                alt.Tooltip("flow_id:N", title="flow"),
            ],
        )
    )
    resume_layer = (
        alt.Chart(_records(resumes))
        .mark_rule(strokeDash=[4, 3], strokeWidth=2, color="#9467bd", clip=True)
        .encode(
            x=x,
            x2=alt.X2(f"{x2_field}:Q"),
            y=y,
            y2=alt.Y2("to_lane:N"),
            tooltip=[
                alt.Tooltip("cursor:N", title="Last-Event-ID"),
                alt.Tooltip("cursor_status:N", title="cursor"),
                alt.Tooltip("cursor_replica:N", title="cursor issued by"),
                alt.Tooltip("answer_replica:N", title="answered by"),
                alt.Tooltip("answer_status:Q", title="status"),
                alt.Tooltip("answer_events:Q", title="events in answer"),
            ],
        )
    )
    end_layer = (
        alt.Chart(_records(ends))
        .mark_tick(thickness=3, size=24)
        .encode(
            x=x,
            y=y,
            color=alt.condition("datum.break", alt.value("#d62728"), alt.value("#7f7f7f")),
            tooltip=[
                alt.Tooltip("end_how:N", title="stream end"),
                alt.Tooltip("replica:N"),
                alt.Tooltip("incarnation:Q"),
                alt.Tooltip("utc:N", title="UTC"),
            ],
        )
    )
    categories = list(_CATEGORY)
    point_layer = (
        alt.Chart(_records(points))
        .mark_point(filled=True, size=90, opacity=0.9)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "category:N",
                title="mark",
                scale=alt.Scale(domain=categories, range=[c for c, _ in _CATEGORY.values()]),
                legend=alt.Legend(orient="bottom", columns=5),
            ),
            shape=alt.Shape(
                "category:N",
                scale=alt.Scale(domain=categories, range=[s for _, s in _CATEGORY.values()]),
                legend=None,
            ),
            tooltip=[
                alt.Tooltip("what:N", title="what"),
                alt.Tooltip("event_id:N", title="event id / cursor"),
                alt.Tooltip("method:N", title="method"),
                alt.Tooltip("rpc_id:N", title="JSON-RPC id"),
                alt.Tooltip("lane:N", title="stream"),
                alt.Tooltip("incarnation:Q"),
                alt.Tooltip("replica:N"),
                alt.Tooltip("utc:N", title="UTC"),
                alt.Tooltip("findings:N", title="findings"),
                alt.Tooltip("payload:N", title="payload"),
            ],
        )
        .add_params(zoom, pick)
    )
    ring_layer = (
        alt.Chart(_records(points.filter(pl.col("named"))))
        .mark_point(size=260, strokeWidth=2, color="#d62728", filled=False)
        .encode(x=x, y=y, tooltip=[alt.Tooltip("findings:N", title="named by")])
    )
    lane_count = max(1, len(lane_order))
    # Rings under the points, so hovering a ringed mark shows the mark's own tooltip.
    chart = alt.layer(bar_layer, resume_layer, end_layer, ring_layer, point_layer).properties(
        # The height includes the axis and the legends below the plot (Streamlit fits to it).
        height=64 * lane_count + 170,
        width=width or "container",
    )
    # Replica colours (bars) and mark colours (points) are two legends, not one merged domain.
    resolved: alt.LayerChart = chart.resolve_scale(color="independent", shape="independent")
    return resolved


def _records(frame: pl.DataFrame) -> pl.DataFrame:
    """A frame Vega-Lite can take: no datetime columns (times travel as `utc` text), and wire
    text in tooltips and labels with its controls and bidi overrides made visible."""
    drop = [n for n, t in frame.schema.items() if isinstance(t, pl.Datetime | pl.List)]
    return inert_frame(frame.drop(drop))


def _lane_number(lane: str) -> int:
    head = lane.split(" ", 1)[0]
    return int(head[1:]) if head[:1] == "S" and head[1:].isdigit() else 0
