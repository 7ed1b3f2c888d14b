"""An event-id counter that restarts or runs backwards within one logical stream.

Ids are opaque; a counter is recognised only where an id ends in a run of 1 to 9 ASCII digits
(`17`, `e7`, `s2_17`; not a 13-digit epoch in milliseconds), and only in a stream where
that prefix's counter rises between neighbouring events somewhere. Within one logical stream,
in wire order, each incarnation is measured from its cursor (a resume legitimately goes back
to it): an event whose counter is at or below the cursor's, or below the highest one already
sent on that incarnation, is flagged unless it is an exact replay (the same id issued earlier
in the session with the same payload). High when a flagged id was issued earlier in the session
with another payload: the MUST of session-unique ids is broken and a cursor now names two
messages, so a client that deduplicates by id drops one and a later resume skips or repeats.
Medium otherwise: ids are still unique, but the server lost its counter state (a restarted
process, a collected buffer), the condition for the next resume to go wrong.
Must not flag: exact replays, opaque ids (UUIDs, base64), epoch-millisecond parts (the
TypeScript SDK's `<streamId>_<epoch-ms>_<rand>`), interleaved streams sharing one counter (only
neighbours on one stream are compared).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.counters import NOT_EPOCH, id_counter

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_STREAM: Final = ("stream_id", "incarnation")


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per incarnation whose counter went back."""
    cursors = timeline.incarnations.select(
        *_STREAM, "cursor", "replica", *id_counter("cursor", "c_prefix", "c_n")
    )
    order = ("ts", "seq", "ordinal")
    with_id = timeline.sse_events.filter(
        pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
    )

    def counters(events: pl.LazyFrame) -> pl.LazyFrame:
        return events.with_columns(*id_counter("event_id", "prefix", "n")).filter(
            pl.col("n").is_not_null() & NOT_EPOCH
        )

    # Only a stream where some incarnation's counter is not `ordinal + constant` can run back
    # within an incarnation (`n - ordinal` constant means strictly rising), and only one whose
    # counter reaches down to its cursor's can go back to it: the timeline's summary of every
    # incarnation's counters (`Timeline.id_counters`) names those few streams before any sort
    # or window sees their events.
    suspect = (
        timeline.id_counters.join(
            # An incarnation without a cursor can meet no cursor here (46k of 437k have one at 10M).
            cursors.filter(pl.col("cursor").is_not_null()).select(*_STREAM, "c_prefix", "c_n"),
            on=list(_STREAM),
            how="left",
        )
        .filter(
            (pl.col("lo") != pl.col("hi"))
            | ((pl.col("c_prefix") == pl.col("prefix")) & (pl.col("n") <= pl.col("c_n"))).fill_null(
                False
            )
        )
        .select("stream_id")
        .unique()
        .collect(engine="streaming")
    )
    if suspect.is_empty():  # no stream can have gone back (the usual case): no more passes
        with_id = pl.LazyFrame(schema=with_id.collect_schema())
    counted = counters(with_id.join(suspect.lazy(), on="stream_id", how="semi"))
    ids = (
        counted.sort("stream_id", "incarnation", "ordinal")
        .with_columns(
            pl.col("n").cum_max().shift(1).over(*_STREAM, "prefix").alias("high"),
            (pl.col("n").diff() > 0).over(*_STREAM, "prefix").alias("rises"),
        )
        .join(cursors, on=list(_STREAM), how="left")
    )
    from_cursor = pl.when(pl.col("c_prefix") == pl.col("prefix")).then(pl.col("c_n"))
    back = pl.col("n") <= pl.max_horizontal("high", from_cursor)
    went_back = ids.filter(
        pl.col("rises").fill_null(False).any().over("stream_id", "prefix")
    ).filter(back.fill_null(False))
    # Whether an id was issued earlier in the session (with this payload, or at all), in wire
    # order: only for the ids that went back (all their issues carry the same counter).
    issues = (
        with_id.join(
            went_back.select("session_id", "event_id"),
            on=["session_id", "event_id"],
            how="semi",
            nulls_equal=True,
        )
        .pipe(counters)  # after the semi-join: the ids are parsed for the few rows it keeps
        .sort(order)
        .select(
            "flow_id",
            "ordinal",
            (pl.int_range(pl.len()).over("session_id", "event_id", "payload_hash") > 0).alias(
                "exact"
            ),
            (pl.int_range(pl.len()).over("session_id", "event_id") > 0).alias("reused"),
        )
    )
    flagged = (
        went_back.join(issues, on=["flow_id", "ordinal"], how="left")
        .sort(*_STREAM, "ordinal")
        .group_by("session_id", *_STREAM, maintain_order=True)
        .agg(
            pl.col("event_id").alias("back"),
            pl.col("event_id").filter(~pl.col("exact")).alias("new"),
            (pl.col("reused") & ~pl.col("exact")).any().alias("collides"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
            (pl.col("n") <= from_cursor).fill_null(False).all().alias("below_cursor"),
            pl.col("cursor", "flow_id", "replica").first(),
        )
        .filter(pl.col("new").list.len() > 0)
    )
    since = pl.when("below_cursor").then(pl.format("the resume's cursor {}", "cursor"))
    detail = pl.format(
        "On stream {} ({}), incarnation {} (flow {}, replica {}) issued {} at or below {} in "
        "the same id counter: the server's counter restarted or ran backwards. {} What to "
        "change:",
        "stream_id",
        pl.col("what").fill_null("standalone GET stream"),
        "incarnation",
        "flow_id",
        pl.col("replica").fill_null("unknown"),
        pl.col("back").list.join(", "),
        since.otherwise(pl.lit("the ids it had already sent")),
        pl.when("collides")
        .then(
            pl.lit(
                "Some of these ids were already issued in the session with another payload: "
                "one cursor now names two messages, so a client that deduplicates by id drops "
                "one and a later resume skips or repeats."
            )
        )
        .otherwise(pl.lit("")),
    )
    streams = timeline.streams.select(
        "stream_id",
        "era",
        "request_id",
        pl.format("{} request {}", "request_method", "request_id").alias("what"),
    )
    return emit(
        flagged.join(streams, on="stream_id"),
        severity=pl.when("collides")
        .then(pl.lit(Severity.HIGH.value))
        .otherwise(pl.lit(Severity.MEDIUM.value)),
        title=pl.format("Event-id counter ran back on stream {}", "stream_id"),
        detail=detail,
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("cursor", "back"),
        request_ids=pl.concat_list("request_id"),
    )


REMEDY: Final = (
    "issue ids from a session-scoped authoritative event log whose counter survives restarts, "
    "buffer expiry and replicas (session-global ids), and refuse a cursor the log cannot place."
)


DETECTOR: Final[Detector] = Detector(
    id="counter-reset",
    severity=Severity.MEDIUM,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
