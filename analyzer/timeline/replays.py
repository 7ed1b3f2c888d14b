"""The few SSE events that replay judgements read: ids issued more than once, resumed streams.

Most events of a capture are sent once on a stream nobody resumed. The detectors that judge
replays (duplicate ids, replays across streams, gaps after a cursor, phantom resumes) look only
at the events whose id recurs in their session or whose stream a resume continued: selecting
those takes a pass over every event, which `build_timeline` makes once and stores, instead of
each detector making its own on every analysis.
"""

from __future__ import annotations

from typing import Final

import polars as pl

__all__ = ["INCARNATION", "RESUMED_EVENT_COLUMNS", "recurring_events", "resumed_events"]

INCARNATION: Final = (pl.col("status") == "resolved") & (
    pl.col("answer_stream_id") == pl.col("stream_id")
)
"""RESUMPTIONS rows of resumes that became an incarnation of their own stream."""

RESUMED_EVENT_COLUMNS: Final = ("stream_id", "flow_id", "ts", "incarnation", "ordinal",
                                "stream_pos", "event_id", "id_only", "payload_hash")  # fmt: skip
"""The SSE_EVENTS columns of `resumed_events` (what the detectors reading it ask for)."""

# An event that names an id (a priming event names one but carries nothing).
_ISSUED: Final = pl.col("event_id").is_not_null() & (pl.col("event_id") != "") & ~pl.col("id_only")


def recurring_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """The SSE_EVENTS rows carrying an event id that some other row of the same session (a null
    session is one) carries too, id-only events left out of both sides.

    The key is a 64-bit hash of (session, id): far less memory than the strings over millions
    of events. A collision would keep a few rows too many, never lose one; every reader
    compares the ids themselves.
    """
    key = pl.struct("session_id", "event_id").hash()
    issued = events.filter(_ISSUED)
    recurring = (
        issued.select(key.alias("_key")).group_by("_key").agg(pl.len()).filter(pl.col("len") > 1)
    )
    return (
        issued.with_columns(key.alias("_key"))
        .join(recurring.select("_key"), on="_key", how="semi")
        .drop("_key")
    )


def resumed_events(events: pl.LazyFrame, resumptions: pl.LazyFrame) -> pl.LazyFrame:
    """The SSE_EVENTS rows (columns `RESUMED_EVENT_COLUMNS`) of every stream that a resume became
    an incarnation of: its first flow's events and every incarnation's.

    A cursor's flow is an incarnation of the stream it resolves to, so these hold every event a
    resume's cursor names as well as all that a replay judgement compares.
    """
    wanted = resumptions.filter(INCARNATION).select("stream_id")
    return events.select(RESUMED_EVENT_COLUMNS).join(wanted, on="stream_id", how="semi")
