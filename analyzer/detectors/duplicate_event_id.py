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
    kinds = timeline.sessions.select("session_id", "kind")
    flows = timeline.exchanges.select("flow_id", "replica", "era")
    # Without a server session, ids only have to be unique within one logical stream.
    scope = (
        pl.when(pl.col("kind").is_in(["mcp", "legacy"]))
        .then(pl.lit(""))
        .otherwise(pl.col("stream_id").fill_null(""))
        .alias("_scope")
    )
    # The events whose id recurs in their session (`Timeline.recurring_events`): only those
    # can have been issued with more than one payload.
    recurring = timeline.recurring_events.join(kinds, on="session_id", how="left").with_columns(
        scope, pl.struct("event", "payload_hash").alias("_payload")
    )
    key = ("session_id", "_scope", "event_id")
    # Most recurring ids are replays of one payload: only the ids with several meet their flows.
    several = (
        recurring.group_by(key)
        .agg(pl.col("_payload").n_unique().alias("_payloads"))
        .filter(pl.col("_payloads") > 1)
    )
    issued = (
        recurring.join(several, on=key, nulls_equal=True)
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
