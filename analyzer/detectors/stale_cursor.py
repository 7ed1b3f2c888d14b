"""A Last-Event-ID that its session never issued, or sent with the request opening a session.

Flags a cursor issued only in another session (named in the detail; high when the server then
replayed that session's messages into this one), a cursor no captured event carries (info when
the session's start is not in the capture: it may predate the capture), and any cursor sent with
`initialize` or a session-opening POST (there is nothing to resume yet). A `Last-Event-ID` sent
in the sessionless 2026 era is an info note: those servers ignore it, it resumes nothing. Not
flagged: a cursor issued in the same session, priming events included. Where the analysis
reaches several origins, another session means another session of the same origin: a cursor
one server issued, sent to another, is one this server never issued (each numbers its own
events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.replays import other_session_replays
from analyzer.wording import pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per request carrying a stale cursor."""
    opening = pl.col("mcp_session_id").is_null() & pl.col("response_session_id").is_not_null()
    flows = timeline.exchanges.select("flow_id", "era", opening.alias("_opening"))
    started = timeline.sessions.select(
        "session_id", pl.col("initialized").alias("_started"), pl.col("origin").alias("_origin")
    )
    replayed = other_session_replays(timeline.resumptions, timeline.sse_events).rename(
        {"replayed": "_replayed"}
    )
    honoured = pl.col("_replayed").list.len() > 0
    sessionless = pl.col("era").str.starts_with("2026-").fill_null(False)
    unseen_start = ~pl.col("_started").fill_null(False) & ~sessionless
    other = pl.col("status") == "other_session"
    found = (
        pl.when(other)
        .then(text("issued only in session {cursor_session_id}"))
        .when(pl.col("status") == "unresolved")
        .then(pl.concat_str(pl.lit(_UNRESOLVED), text(" at {_origin}"), ignore_nulls=True))
        .otherwise(pl.lit("issued in this session"))
    )
    where = text(
        " (stream {cursor_stream_id}, flow {cursor_flow_id}{priming})",
        priming=pick((pl.col("cursor_priming"), ", a priming event"), otherwise=""),
    )
    notes = pl.concat_str(
        pl.when(other).then(where),
        pl.lit("."),
        text(" The server answered {status}.", status=pl.col("answer_status").cast(pl.String)),
        pl.when(pl.col("_opening")).then(pl.lit(_OPENING)),
        pl.when(sessionless).then(pl.lit(_SESSIONLESS)),
        pl.when(unseen_start).then(pl.lit(_UNSEEN_START)),
        pl.when(honoured).then(text(_HONOURED, replayed=pl.col("_replayed").list.join(", "))),
        ignore_nulls=True,
    )
    sent_with = pl.when(pl.col("_opening")).then(pl.lit("the session-opening request"))
    return (
        timeline.resumptions.filter(pl.col("cursor").str.strip_chars() != "")
        .join(flows, on="flow_id", how="left")
        .join(started, on="session_id", how="left")
        .join(replayed, on="flow_id", how="left")
        .with_columns(
            (pl.col("with_initialize") | pl.col("_opening").fill_null(False)).alias("_opening"),
            pl.col("_replayed").fill_null([]),
        )
        .filter((pl.col("status") != "resolved") | pl.col("_opening"))
        .pipe(
            emit,
            severity=pick(
                (honoured, "high"), (sessionless | unseen_start, "info"), otherwise="medium"
            ),
            title=text(
                "cursor {cursor} {found}, sent with {sent_with}",
                found=found,
                sent_with=sent_with.otherwise(pl.col("method")),
            ),
            detail=text(
                "Session {session_id}: {method} {flow_id} carried Last-Event-ID {cursor}, "
                "{found}{notes}",
                found=found,
                notes=notes,
            ),
            remedy=REMEDY,
            flow_ids=pl.concat_list("flow_id", "cursor_flow_id"),
            stream_ids=pl.concat_list("answer_stream_id", "cursor_stream_id"),
            event_ids=pl.concat_list("cursor", "_replayed"),
            first_ts=pl.coalesce("cursor_ts", "ts"),
            last_ts="ts",
        )
    )


_OPENING = (
    " It came with the request that opened the session: there was nothing to resume yet, so it "
    "is left over from an earlier session or client run."
)
_SESSIONLESS = (
    " The sessionless 2026 era has no resumption: the server ignores the header, and a client "
    "whose stream broke re-issues the request under a new id."
)
_UNSEEN_START = " The session's start is not in the capture: the id may predate the capture."
_HONOURED = (
    " The server honoured it: it replayed message(s) {replayed} of that session into this one."
)
_UNRESOLVED = "never issued in any captured session"
REMEDY: Final = (
    "Clients must drop cursors that predate the session (clear the stored Last-Event-ID on "
    "initialize and after a 404); servers should reject a cursor the session never issued "
    "rather than answer as if resuming, and embed the session in event ids."
)


DETECTOR: Final[Detector] = Detector(
    id="stale-cursor",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
