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
from analyzer.timeline.counters import ran_back_by_incarnation
from analyzer.wording import OPENER, or_unknown, pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_COLLIDES: Final = (
    "Some of these ids were already issued in the session with another payload: one cursor now "
    "names two messages, so a client that deduplicates by id drops one and a later resume skips "
    "or repeats."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per incarnation whose counter went back."""
    flagged = ran_back_by_incarnation(
        timeline.sse_events, timeline.incarnations, timeline.id_counters
    ).filter(pl.col("new").list.len() > 0)  # an exact replay goes back legitimately
    what = OPENER.fill_null("standalone GET stream").alias("what")
    streams = timeline.streams.select("stream_id", "era", "request_id", what)
    return emit(
        flagged.join(streams, on="stream_id"),
        severity=pick((pl.col("collides"), "high"), otherwise="medium"),
        title=text("Event-id counter ran back on stream {stream_id}"),
        detail=text(
            "On stream {stream_id} ({what}), incarnation {incarnation} (flow {flow_id}, replica "
            "{replica}) issued {back} at or below {since} in the same id counter: the server's "
            "counter restarted or ran backwards. {collides} What to change:",
            replica=or_unknown("replica"),
            back=pl.col("back").list.join(", "),
            since=pl.when("below_cursor")
            .then(text("the resume's cursor {cursor}"))
            .otherwise(pl.lit("the ids it had already sent")),
            collides=pick((pl.col("collides"), _COLLIDES), otherwise=""),
        ),
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
