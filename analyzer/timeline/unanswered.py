"""The client's requests no answer answered, with what says where their response could have been:
the evidence `lost-response` judges.

`requests` keeps the requests the client sent in a body with an id (not `subscriptions/listen`,
answered only when the client ends it) that no answer answered at or after them
(`analyzer.timeline.answers`), each with its exchange, the stream it opened, the client's first
cancellation of it, and whether that stream issued any cursor. `open_get_sessions` names the
sessions with a GET stream still open at capture end (where a 202-accepted request's response
may yet come).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.timeline.answers import CANCELLATION, CARRIER, REQUEST

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

# The answer was not wholly captured: the response may be in the part we do not have.
_UNSEEN: Final = (
    pl.col("body_missing").fill_null(False)
    | (pl.col("response_truncated_bytes").fill_null(0) > 0)
    | (pl.col("tail_bytes").fill_null(0) > 0)
).alias("unseen")


def requests(timeline: Timeline) -> pl.LazyFrame:
    """The unanswered requests (a few: only those meet their exchange and stream), with their
    exchange's `era`, `status`, `replica` and `unseen`; their stream's (`carrier`)
    `incarnations`, `end_ts` and how it ended (`how`: the chain's last incarnation, else the
    exchange); the first cancellation's `cancel_ts`; `no_cursor` when the stream issued no
    event id (never resumed, so one incarnation: nothing to resume)."""
    # Requests, answers and cancellations only: the rows `build_timeline` collected once.
    msgs = timeline.rpc_messages
    cancels = (
        msgs.filter(CANCELLATION)
        .group_by("session_id", pl.col("cancel_id").alias("rpc_id"))
        .agg(pl.col("ts").min().alias("cancel_ts"))
    )
    no_cursor = timeline.incarnations.filter(
        (pl.col("incarnation") == 0) & pl.col("last_cursor").is_null()
    ).select(pl.col("stream_id").alias("carrier"), pl.lit(True).alias("no_cursor"))
    sent = msgs.filter(
        REQUEST
        & (pl.col("source") == "request_body")
        & pl.col("rpc_id").is_not_null()
        & (pl.col("method") != "subscriptions/listen").fill_null(True)
        & ~pl.col("answered")
    ).select(
        "session_id", "flow_id", "ts", "rpc_id", "method", "tool_name", CARRIER.alias("carrier")
    )
    exchange = timeline.exchanges.select("flow_id", "era", "status", "end_how", "replica", _UNSEEN)
    stream = timeline.streams.select(
        pl.col("stream_id").alias("carrier"), "incarnations", "last_end_how", "end_ts"
    )
    return (
        sent.join(exchange, on="flow_id")
        .join(stream, on="carrier", how="left")
        .with_columns(pl.coalesce("last_end_how", "end_how").alias("how"))
        .join(cancels, on=["session_id", "rpc_id"], how="left")
        .join(no_cursor, on="carrier", how="left")
    )


def open_get_sessions(timeline: Timeline) -> pl.LazyFrame:
    """The sessions (`session_id`, `get_open` true) with a GET stream open at capture end."""
    return (
        timeline.streams.filter(
            (pl.col("kind") == "get")
            & (pl.col("last_end_how").is_null() | (pl.col("last_end_how") == "open_at_shutdown"))
        )
        .select("session_id", pl.lit(True).alias("get_open"))
        .unique()
    )
