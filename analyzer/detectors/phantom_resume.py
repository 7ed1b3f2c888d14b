"""A resume answered 200 that is not a continuation of its stream, and says nothing about it.

Flags a resume that became an incarnation of stream S (a GET whose Last-Event-ID S issued,
answered 2xx with an event stream) when a replay was due, because S had carried events with ids
after the cursor before the resume, and none of them came on the answer (by event id or
payload), while the answer did issue something: fresh non-priming events where the replay was
due, or only a new priming event, which moves the client's cursor past what it never got. And
nothing told the client the cursor was not honoured: no JSON-RPC error on the answer. High: the
client takes the answer for a continuation, and the messages it was owed are gone for it.
Must not flag: a correct replay followed by a new priming event; an answer that carried no
event at all (interrupted, or polling: the client keeps its cursor and resumes again); a
partial replay (`causal-gap` judges what it left out).
What to change: replay from a session-scoped authoritative event log every replica can read (or
route resumes to the replica holding it: sticky routing), and answer a cursor you cannot honour
with an error, never with 200 and a fresh stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detectors import Detector
from analyzer.findings import Severity

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_HAS_ID: Final = pl.col("event_id").is_not_null() & (pl.col("event_id") != "")


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume answered with anything but the replay that was due."""
    # The resumes placed at their cursor, and the events their streams carried after it that
    # issue an id, by id and payload (placed once when the timeline was built).
    resumes = timeline.resumes_at_cursor.filter(pl.col("answer_status").is_between(200, 299))
    due = timeline.after_cursor.join(resumes.select("r_flow"), on="r_flow", how="semi")
    # The answers' own events (among the resumed streams'): joined on their flow, not through
    # every event of the stream.
    answer = timeline.resumed_events.join(
        resumes.select("r_flow", "stream_id"),
        left_on=["flow_id", "stream_id"],
        right_on=["r_flow", "stream_id"],
    ).select(pl.col("flow_id").alias("r_flow"), "event_id", "payload_hash", "stream_pos", "id_only")
    # The answers' events are many, what was due few: the join keeps what was due in its table.
    came = pl.concat(
        [
            answer.select("r_flow", key).join(
                due.select("r_flow", key), on=["r_flow", key], how="semi"
            )
            for key in ("event_id", "payload_hash")
        ]
    ).select("r_flow")
    errors = timeline.rpc_messages.filter(
        (pl.col("direction") == "s2c") & (pl.col("kind") == "error")
    ).select(pl.col("flow_id").alias("r_flow"))
    unserved = (
        due.group_by("r_flow")
        .agg(
            pl.col("event_id").sort_by("stream_pos").unique(maintain_order=True).alias("due"),
            pl.all().exclude("event_id").first(),
        )
        .join(came, on="r_flow", how="anti")
        .join(errors, on="r_flow", how="anti")
    )
    # What the answers sent, for the few resumes left.
    sent = (
        answer.join(unserved.select("r_flow"), on="r_flow", how="semi")
        .group_by("r_flow")
        .agg(
            pl.col("event_id").filter(_HAS_ID).sort_by("stream_pos").alias("sent"),
            (~pl.col("id_only")).sum().alias("payloads"),
        )
    )
    sent_text = (
        pl.when(pl.col("payloads") > 0)
        .then(pl.format("{} fresh message(s) (ids {})", "payloads", pl.col("sent").list.join(", ")))
        .otherwise(pl.format("only a new priming event ({})", pl.col("sent").list.join(", ")))
    )
    detail = pl.format(
        "The resume of stream {} ({}) from cursor {} (issued by replica {}) on flow {} was "
        "answered 200 by replica {} with {} instead of the {} message(s) the stream had carried "
        "after the cursor ({}). Nothing on the answer said the cursor was not honoured: the "
        "client takes it for a continuation and will never see those messages. What to change: "
        "replay from a session-scoped authoritative event log every replica can read, or route "
        "resumes to the replica that issued the cursor (sticky routing); answer a cursor you "
        "cannot honour with an error instead of 200 and a fresh stream.",
        "stream_id",
        pl.col("what").fill_null("standalone GET stream"),
        "cursor",
        pl.col("cursor_replica").fill_null("unknown"),
        "r_flow",
        pl.col("answer_replica").fill_null("unknown"),
        sent_text,
        pl.col("due").list.len(),
        pl.col("due").list.join(", "),
    )
    streams = timeline.streams.select(
        "stream_id",
        "session_id",
        "era",
        "request_id",
        pl.format("{} request {}", "request_method", "request_id").alias("what"),
    )
    return (
        unserved.join(
            sent.filter((pl.col("payloads") > 0) | (pl.col("sent").list.len() > 0)), on="r_flow"
        )
        .join(streams, on="stream_id")
        .select(
            pl.col("session_id").alias("session"),
            "era",
            pl.format("Resume of stream {} answered without its replay", "stream_id").alias(
                "title"
            ),
            detail.alias("detail"),
            pl.concat_list("cursor_flow_id", "r_flow").alias("flow_ids"),
            pl.concat_list("stream_id").alias("stream_ids"),
            pl.concat_list("cursor", "due", "sent").alias("event_ids"),
            pl.concat_list("request_id").alias("request_ids"),
            pl.col("r_ts").alias("first_ts"),
            pl.col("r_ts").alias("last_ts"),
        )
    )


DETECTOR: Final[Detector] = Detector(
    id="phantom-resume", severity=Severity.HIGH, description=__doc__ or "", detect=detect
)
