"""One event delivered twice on the same HTTP response: the same event id, the same payload.

Within one response (one incarnation of a stream), an event id carried a second time with the
same payload: the client receives one message twice on one connection, where no replay was
asked for (high for a response or a server request, which the client may act on twice or reject
as unknown; medium for a notification; typescript-sdk #2547 review: a resumed stream got the
stored response from the replay, then the same event again from the send that stored it). Not
flagged: a replay on a later incarnation (the client asked for it with its cursor), id-only
priming events, equal payloads under different event ids (new notifications; an answer
repeated under a fresh id is `duplicate-response` or, from another session's store,
`cross-session-replay`), the same id with a different payload (`duplicate-event-id`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline.replays import delivered_twice
from analyzer.wording import pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "Servers should write each stored event to a connection once, tracking what a replay "
    "already delivered, instead of writing from both the store and the sender."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per message carried twice on one response."""
    twice = delivered_twice(timeline.messages)
    eras = timeline.streams.select("stream_id", "era")
    is_answer = pl.col("_kind").is_in(["request", "response", "error"])
    what = (
        pl.when(is_answer)
        .then(text("{_kind} {rpc_id}"))
        .otherwise(text("{method} {_event_id}", method=pl.col("_method").fill_null("message")))
    )
    return emit(
        twice.join(eras, on="stream_id", how="left").sort("session_id", "first_ts", "flow_id"),
        severity=pick((is_answer, "high"), otherwise="medium"),
        title=text("{what} delivered {_times} times on one response", what=what),
        detail=text(
            "Session {session_id}: response {flow_id} (incarnation {incarnation} of stream "
            "{stream_id}) carried {what} {_times} times with the same payload (event id "
            "{_event_id}). The client receives one message twice on one connection, where no "
            "replay was asked for, and may act on it twice.",
            what=what,
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("_event_id"),
        request_ids=pl.when(is_answer)
        .then(pl.concat_list("rpc_id"))
        .otherwise(pl.lit([], dtype=pl.List(pl.String))),
    )


DETECTOR: Final[Detector] = Detector(
    id="double-delivery",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
