"""A resumed stream S replaying messages that were first sent on another logical stream.

On each incarnation of S after the first (a GET whose Last-Event-ID S issued), a message is
foreign when it was first sent on another logical stream T of the same session: an event with
the same id and payload seen earlier on T, or the response to T's request. The server "MUST NOT
replay messages of a different stream" nor send a message on more than one stream: the client
receives T's messages twice, or on a stream where it does not expect them (high).
Must not flag: S's own messages replayed on its incarnations (a response to S's own request id
is S's, even when the client reused that id in its session: `analyzer.timeline.answers`),
id-only priming events, equal payloads under fresh event ids (new messages), events whose id
recurs with another payload (`duplicate-event-id`).
"""

# Longer than the 80 lines of STYLE.md item 8: foreign events and foreign responses are found by
# different keys and gathered into one finding per resume.

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.wording import or_unknown, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_KEYS: Final = ("session_id", "stream_id", "flow_id", "incarnation", "ts")


REMEDY: Final = (
    "key the event store by stream (event ids that encode their stream), replay only the "
    "resolved stream's events after the cursor, keep event ids session-unique."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per resume incarnation that delivered another stream's messages."""
    # A foreign event is a sending of a message (session, id, payload) sent earlier too: its
    # id recurs in the session, so it is among `Timeline.recurring_events` (the events with ids,
    # id-only ones left out), as are the earlier sendings.
    events = timeline.recurring_events
    foreign = (pl.col("first_stream_id") != pl.col("stream_id")) & (
        pl.col("first_ts") < pl.col("ts")
    )
    keys = ["session_id", "event_id", "payload_hash"]
    # The messages a resume carried, and every sending of them, gathered by key: where each was
    # first sent and the resumed rows themselves, in one pass.
    carried = events.filter(pl.col("incarnation") > 0).select(keys)
    resumed_rows = pl.struct("stream_id", "flow_id", "incarnation", "ts").filter(
        pl.col("incarnation") > 0
    )
    by_event = (
        events.join(carried, on=keys, how="semi")
        .group_by(keys)
        .agg(
            pl.col("stream_id", "ts").sort_by("ts", "seq").first().name.prefix("first_"),
            resumed_rows.alias("_resumed"),
        )
        .explode("_resumed")
        .unnest("_resumed")
        .filter(foreign)
        .select(*_KEYS, "first_stream_id", "event_id", pl.lit(None, pl.String).alias("rpc_id"))
    )  # fmt: skip
    # A response replayed on S answers another stream's request (`analyzer.timeline.answers`:
    # S's own request when it has the response's id, else the latest earlier request with it).
    by_response = (
        timeline.rpc_messages.filter(
            (pl.col("incarnation") > 0) & (pl.col("answers") != pl.col("stream_id"))
        )
        .join(
            timeline.streams.filter(pl.col("kind") == "post").select(
                pl.col("stream_id").alias("answers")
            ),
            on="answers",
            how="semi",
        )
        .select(*_KEYS, pl.col("answers").alias("first_stream_id"), "event_id", "rpc_id")
    )
    found = (
        pl.concat([by_event, by_response])
        .group_by("session_id", "stream_id", "flow_id", "incarnation")
        .agg(
            pl.col("first_stream_id").unique(maintain_order=True).alias("others"),
            pl.col("event_id").drop_nulls().unique(maintain_order=True).alias("event_ids"),
            pl.col("rpc_id").drop_nulls().unique(maintain_order=True).alias("request_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .join(timeline.incarnations.select("flow_id", "cursor", "replica"), on="flow_id")
        .join(timeline.streams.select("stream_id", "era"), on="stream_id")
    )
    others = pl.col("others").list.join(", ")
    return emit(
        found,
        title=text("Resume of stream {stream_id} replayed messages of stream(s) {others}",
                   others=others),
        detail=text(
            "Session {session_id}: the resume of stream {stream_id} from Last-Event-ID {cursor} "
            "(flow {flow_id}, incarnation {incarnation}, replica {replica}) delivered message(s) "
            "first sent on other logical stream(s) {others}: event ids [{events}], responses to "
            "requests [{requests}]. A resume must replay only the disconnected stream's "
            "messages; the client now holds these twice or on the wrong stream. What to change:",
            replica=or_unknown("replica"),
            others=others,
            events=pl.col("event_ids").list.join(", "),
            requests=pl.col("request_ids").list.join(", "),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id"),
        stream_ids=pl.concat_list("stream_id", "others"),
        event_ids="event_ids",
        request_ids="request_ids",
    )  # fmt: skip


DETECTOR: Final[Detector] = Detector(
    id="cross-stream-replay",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
