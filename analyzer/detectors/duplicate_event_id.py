"""One SSE event id issued twice in a session with different payloads.

Event ids MUST be unique across all streams of a session (Streamable HTTP, 2025-03-26 on): a
client that resumes from an id the server issued for two messages cannot get a faithful replay.
Payloads are (event type, canonical data). Not flagged: exact replays (same id, same payload),
id-only priming events (they carry no payload and are never compared), and, where the server
keeps no session (`anon:` and `client:` keys), ids reused across different logical streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.replays import reissued
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline


REMEDY: Final = (
    "Issue ids from a session-scoped authoritative event log (session-global ids that never "
    "restart with a process, buffer or replica) and route each session to the replica holding "
    "its log (sticky routing)."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per (session, event id) that named more than one payload."""
    flows = timeline.exchanges.select("flow_id", "replica", "era")
    key = ("session_id", "_scope", "event_id")
    issued = (
        reissued(timeline.recurring_events, timeline.sessions)
        .join(flows, on="flow_id", how="left")
        .sort("ts", "seq", "ordinal")
    )
    found = issued.group_by(key).agg(
        pl.col("_payloads").first(),
        pl.len().alias("_issues"),
        pl.col("flow_id").unique(maintain_order=True).alias("flow_ids"),
        pl.col("stream_id").drop_nulls().unique(maintain_order=True).alias("stream_ids"),
        pl.col("replica").drop_nulls().unique(maintain_order=True).alias("_replicas"),
        pl.col("era").first(),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    )
    replicas = pl.col("_replicas").list.join(", ").fill_null("")
    return emit(
        found,
        title=text(
            "event id {event_id} issued {_issues} times with {_payloads} different payloads"
        ),
        detail=text(
            "Session {session_id}: the server issued event id {event_id} {_issues} times with "
            "{_payloads} different payloads, on stream(s) {streams} (flows {flows}, in wire "
            "order; replica(s): {replicas}). A client resuming from this id cannot get a faithful "
            "replay: the server will replay after the wrong message, or skip or repeat messages. "
            "Event ids MUST be unique across all streams of a session.",
            streams=pl.col("stream_ids").list.join(", "),
            flows=pl.col("flow_ids").list.join(", "),
            replicas=pl.when(replicas == "").then(pl.lit("unknown")).otherwise(replicas),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        stream_ids="stream_ids",
        event_ids=pl.concat_list("event_id"),
    )


DETECTOR: Final[Detector] = Detector(
    id="duplicate-event-id",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
