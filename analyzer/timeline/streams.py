"""Logical streams and their incarnations (DESIGN.md §2).

A logical stream is opened by a POST answered with `text/event-stream`, or by a GET whose
Last-Event-ID (if any) resolves to no stream of its session; `stream_id` is the flow id of that
opening response. A GET answered with an event stream whose Last-Event-ID resolves to an event
of stream S *in its own session* is the next incarnation of S, however many resumes lie between
(cursor → issuing flow → that flow's stream, followed to the opening flow).

Cursor resolution: the cursor is matched against every id the server issued in the session
(priming events included), before the resuming request; the latest such issue in wire order wins
(time, record number, then place in the chunk: a replayed event carries its id again, on a later
incarnation of the same stream; a constant priming id or a reused counter is issued many times).
"""

from __future__ import annotations

import polars as pl

from analyzer import schema as S
from analyzer.timeline.order import latest_before

__all__ = [
    "delivered_responses",
    "incarnations",
    "issued_cursors",
    "own_issues",
    "resolve_cursors",
    "stream_map",
    "streams",
]

_MAX_HOPS = 64

_STREAM_MAP = pl.Schema(
    {
        "flow_id": pl.String,
        "stream_id": pl.String,
        "incarnation": pl.Int32,
        "base_events": pl.Int64,
        "base_payload_events": pl.Int64,
    }
)


# Where a cursor may have been issued: one origin's sessions (`analyzer.timeline.keys`; "" where
# the analysis reaches one). Each server issues its own ids: a counter `3` of server A is no
# issue of a cursor `3` sent to server B, whose sessions never saw it.
_SCOPE = pl.col("origin").fill_null("").alias("scope")


def issued_cursors(
    events: pl.LazyFrame, keyed: pl.LazyFrame, cursors: pl.Series | None = None
) -> pl.LazyFrame:
    """The event ids the server sent that some request carried back, where and when.

    Only ids equal to a captured Last-Event-ID matter for resolution. Given those `cursors`
    (a caller that has the flows in memory knows them), the filter goes down into the Parquet
    scan; else a semi-join finds them.
    """
    issued = events.filter(pl.col("event_id").is_not_null() & (pl.col("event_id") != ""))
    if cursors is not None:
        issued = issued.filter(pl.col("event_id").is_in(cursors.implode()))
    else:
        sent = (
            keyed.filter(pl.col("last_event_id").is_not_null())
            .select(pl.col("last_event_id").alias("event_id"))
            .unique()
        )
        issued = issued.join(sent, on="event_id", how="semi")
    return issued.select(
        "flow_id", "ordinal", "ts", "seq", "event_id", "id_only", "payload_seen"
    ).join(keyed.select("flow_id", "session_id", _SCOPE), on="flow_id", how="inner")


# Wire order among records of one time: the record number, then an event's place in its chunk
# (the events of one chunk share its number: a constant id issued twice in one chunk resolves to
# the later one). A record number times this, plus the ordinal, orders both.
_ORDINALS = 1 << 20


def _wire(seq: str, ordinal: pl.Expr | None = None) -> pl.Expr:
    """The wire-order number of a record `seq` (and an event's `ordinal` in it)."""
    at = pl.col(seq) * _ORDINALS
    return at if ordinal is None else at + ordinal.clip(0, _ORDINALS - 1)


def _issues(issued: pl.LazyFrame, prefix: str, wanted: pl.LazyFrame) -> pl.LazyFrame:
    """The issues of the ids `wanted` asks for (a key of `issued`), their columns prefixed
    (`{prefix}wire`: their wire order at one time, `_wire`)."""
    return issued.join(wanted.unique(), on=wanted.collect_schema().names(), how="semi").select(
        pl.col("event_id").alias("cursor"),
        *(
            pl.col(c).alias(f"{prefix}{c}")
            for c in ("session_id", "flow_id", "ordinal", "ts", "seq", "id_only")
        ),
        pl.col("payload_seen").alias(f"{prefix}payload_seen"),
        _wire("seq", pl.col("ordinal")).alias(f"{prefix}wire"),
        "scope",
    )


# Cursors and their issues are matched by sorting them together (`latest_before`), and another
# session is looked in only for a cursor its own never issued: joined on the id alone, a
# per-session counter id met every session that issued it.


def own_issues(keyed: pl.LazyFrame, issued: pl.LazyFrame) -> pl.LazyFrame:
    """One row per request carrying Last-Event-ID (`flow_id, session_id, cursor, ts, seq`) and
    `c_*`: the latest issue of its cursor in its own session before it (nulls when none)."""
    cursors = keyed.filter(pl.col("last_event_id").is_not_null()).select(
        "flow_id",
        "session_id",
        pl.col("last_event_id").alias("cursor"),
        "ts",
        pl.col("req_seq").alias("seq"),
        _wire("req_seq").alias("_wire"),
        _SCOPE,
    )
    asked = cursors.select("session_id", pl.col("cursor").alias("event_id"))
    return latest_before(
        cursors,
        _issues(issued, "c_", asked)
        .with_columns(pl.col("c_session_id").alias("session_id"))
        .drop("scope"),
        by=("session_id", "cursor"),
        on=("ts", "_wire"),
        candidate_on=("c_ts", "c_wire"),
    ).drop("_wire", "c_wire")


def resolve_cursors(own: pl.LazyFrame, issued: pl.LazyFrame) -> pl.LazyFrame:
    """`own_issues` output with where each cursor was issued: `o_*`, for a cursor its own session
    never issued, the latest issue in another session; `status` (`CURSOR_STATUS`)."""
    own = own.cache()  # read twice: computed once (when it is not collected already)
    lost = own.filter(pl.col("c_flow_id").is_null()).select(
        "flow_id", "session_id", "cursor", "ts", _wire("seq").alias("_wire"), "scope"
    )
    other = latest_before(
        lost,
        _issues(issued, "o_", lost.select(pl.col("cursor").alias("event_id"), "scope")),
        by=("cursor", "scope"),
        on=("ts", "_wire"),
        candidate_on=("o_ts", "o_wire"),
        other_than=("session_id", "o_session_id"),
    ).drop("session_id", "cursor", "ts", "_wire", "o_wire", "scope")
    return (
        own.drop("scope")
        .join(other, on="flow_id", how="left")
        .with_columns(
            pl.when(pl.col("c_flow_id").is_not_null())
            .then(pl.lit("resolved"))
            .when(pl.col("o_flow_id").is_not_null())
            .then(pl.lit("other_session"))
            .otherwise(pl.lit("unresolved"))
            .cast(S.CURSOR_STATUS)
            .alias("status")
        )
    )


def _follow_to_root(edges: pl.DataFrame) -> pl.DataFrame:
    """flow_id -> root, following `parent` links (pointer jumping: log2(depth) joins)."""
    current = edges.select("flow_id", pl.col("parent").alias("root"))
    for _ in range(_MAX_HOPS):
        step = current.join(
            current.rename({"flow_id": "root", "root": "_up"}), on="root", how="left"
        ).with_columns(pl.coalesce("_up", "root").alias("root"))
        if step.select((pl.col("_up").is_null()).all()).item():
            return step.drop("_up")
        current = step.drop("_up")
    return current  # a cycle (impossible with strictly earlier cursors): stop where we are


def stream_map(keyed: pl.LazyFrame, resolved: pl.LazyFrame) -> pl.LazyFrame:
    """flow_id -> stream_id, incarnation, events of the stream's earlier incarnations."""
    sse = keyed.filter(pl.col("sse"))
    edges = (
        resolved.filter(pl.col("c_flow_id").is_not_null())
        .join(sse.filter(pl.col("method") != "POST").select("flow_id"), on="flow_id")
        .select("flow_id", pl.col("c_flow_id").alias("parent"))
    )
    roots = edges.map_batches(
        _follow_to_root, schema=pl.Schema({"flow_id": pl.String, "root": pl.String})
    )
    return (
        sse.select("flow_id", "ts", "req_seq", "events", "payload_events")
        .join(roots, on="flow_id", how="left")
        .with_columns(pl.coalesce("root", "flow_id").alias("stream_id"))
        .sort("stream_id", "ts", "req_seq", nulls_last=True)
        .with_columns(
            pl.int_range(pl.len(), dtype=pl.Int32).over("stream_id").alias("incarnation"),
            (pl.col("events").cum_sum().over("stream_id") - pl.col("events"))
            .cast(pl.Int64)
            .alias("base_events"),
            (pl.col("payload_events").cum_sum().over("stream_id") - pl.col("payload_events"))
            .cast(pl.Int64)
            .alias("base_payload_events"),
        )
        .select(_STREAM_MAP.names())
    )


def delivered_responses(
    streams_of_flows: pl.LazyFrame, keyed: pl.LazyFrame, messages: pl.LazyFrame
) -> pl.LazyFrame:
    """Responses to a POST stream's request delivered on one of its incarnations.

    Columns: stream_id, flow_id, incarnation, ts (first such delivery on that flow).
    """
    openers = (
        streams_of_flows.filter(pl.col("incarnation") == 0)
        .join(keyed.select("flow_id", "method", "rpc_id"), on="flow_id")
        .filter((pl.col("method") == "POST") & pl.col("rpc_id").is_not_null())
        .select("stream_id", pl.col("rpc_id").alias("request_id"))
    )
    return (
        messages.filter(
            (pl.col("direction") == "s2c")
            & pl.col("kind").is_in(["response", "error"])
            & pl.col("rpc_id").is_not_null()
        )
        .select("flow_id", "rpc_id", "ts")
        .join(streams_of_flows.select("flow_id", "stream_id", "incarnation"), on="flow_id")
        .join(openers, left_on=["stream_id", "rpc_id"], right_on=["stream_id", "request_id"])
        .group_by("stream_id", "flow_id", "incarnation")
        .agg(pl.col("ts").min())
    )


def streams(
    streams_of_flows: pl.LazyFrame, *, keyed: pl.LazyFrame, delivered: pl.LazyFrame
) -> pl.LazyFrame:
    """The STREAMS frame: one row per logical stream."""
    incs = streams_of_flows.join(
        keyed.select("flow_id", "end_how", "end_ts", "events", "payload_events"), on="flow_id"
    )
    totals = incs.group_by("stream_id").agg(
        pl.len().cast(pl.Int32).alias("incarnations"),
        pl.col("events").sum().cast(pl.Int64),
        pl.col("payload_events").sum().cast(pl.Int64),
        pl.col("end_how").sort_by("incarnation").last().alias("last_end_how"),
        pl.col("end_ts").max(),
    )
    first_delivery = delivered.group_by("stream_id").agg(
        pl.col("incarnation").sort_by("ts").first().alias("response_incarnation"),
        pl.col("ts").min().alias("response_ts"),
    )
    kind = pl.when(pl.col("method") == "POST").then(pl.lit("post")).otherwise(pl.lit("get"))
    return (
        streams_of_flows.filter(pl.col("incarnation") == 0)
        .join(keyed.drop("events", "payload_events", "end_how", "end_ts"), on="flow_id")
        .with_columns(kind.cast(S.STREAM_KIND).alias("kind"))
        .join(totals, on="stream_id", how="left")
        .join(first_delivery, on="stream_id", how="left")
        .with_columns(
            pl.col("req_seq").alias("seq"),
            pl.when(pl.col("kind") == "post").then("rpc_id").alias("request_id"),
            pl.when(pl.col("kind") == "post").then("rpc_method").alias("request_method"),
            pl.when(pl.col("kind") == "get").then("last_event_id").alias("stale_cursor"),
            pl.when(pl.col("kind") == "post")
            .then(pl.col("response_ts").is_not_null())
            .alias("response_delivered"),
        )
        .select(S.STREAMS.names())
        .sort("session_id", "stream_id", "ts", "seq", nulls_last=True)
    )


def incarnations(
    streams_of_flows: pl.LazyFrame, *, keyed: pl.LazyFrame, delivered: pl.LazyFrame
) -> pl.LazyFrame:
    """The INCARNATIONS frame: one row per HTTP response carrying a logical stream."""
    return (
        streams_of_flows.join(keyed.drop("ts"), on="flow_id")
        .join(
            delivered.select("flow_id", pl.lit(True).alias("delivered_response")),
            on="flow_id",
            how="left",
        )
        .join(keyed.select("flow_id", "ts"), on="flow_id")
        .with_columns(
            pl.col("req_seq").alias("seq"),
            pl.when(pl.col("incarnation") > 0).then("last_event_id").alias("cursor"),
            pl.col("resp_ts").alias("response_ts"),
            pl.col("first_cursor").alias("first_event_id"),
            pl.col("delivered_response").fill_null(False),
        )
        .select(S.INCARNATIONS.names())
        .sort("session_id", "stream_id", "ts", "seq", nulls_last=True)
    )
