"""A client request whose response never reached the client, by the end of its chain or session.

For every JSON-RPC request the client sent (batch members included) and the server accepted
(2xx), the response (result or error) must arrive somewhere: on the request's own exchange, on
any incarnation of the stream it opened, or, in the sessioned eras, later elsewhere in its
session while no later request has reused its id (a 202-accepted request is answered on a GET
stream; `analyzer.timeline.answers` says which request an answer answers). In 2026-07-28 traffic
a response belongs to the exchange that carried it, so only the request's own stream counts
there. High; info when the request's stream (or, for a request without one, a GET stream of its
session) was still open at capture end, or its answer was not wholly captured (truncated or
missing body, torn tail).
Must not flag: requests the client cancelled (`notifications/cancelled`; in 2026-07-28 closing
or breaking the request's stream is its cancellation, so only a stream the server completed
without the response counts), `subscriptions/listen` (answered only when the client ends it),
requests the server refused (non-2xx: the client knows), server-to-client requests.
A cancellation sent only after the server had ended the request's stream without the response
and without an event id to resume from does not count: nothing could bring the response any
more, and both official SDKs' clients send one when such a request times out (the loss came
first, the client gave up on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import unanswered
from analyzer.timeline.keys import SESSIONLESS
from analyzer.wording import or_unknown, pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_OPEN: Final = pl.col("how").is_null() | (pl.col("how") == "open_at_shutdown")
# Cancelled only after the server had ended the request's stream, response-less and with no
# event id to resume from: the client gave up on a response that could no longer come.
_GAVE_UP: Final = (
    (pl.col("incarnations") == 1)
    & pl.col("no_cursor").fill_null(False)
    & pl.col("last_end_how").is_in(["complete", "server_closed"])
    & (pl.col("cancel_ts") > pl.col("end_ts"))
).fill_null(False)
_GAVE_UP_TEXT: Final = (
    "the client cancelled it only {ms} ms after the server had ended its stream without the "
    "response and without an event id to resume from (it gave up on a response that could no "
    "longer come)"
)
_STILL_OPEN: Final = " Its stream was still open at capture end: the response may yet come."
_UNSEEN: Final = (
    " Part of its answer was not captured (a truncated or missing body, or a torn stream tail): "
    "the response may be there."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per accepted client request that no response ever answered."""
    requests = (
        unanswered.requests(timeline)
        .filter(pl.col("status").is_between(200, 299).fill_null(False))
        # In 2026-07-28 closing or breaking a request's stream is its cancellation.
        .filter(~SESSIONLESS.fill_null(False) | (pl.col("how") == "complete").fill_null(False))
        .filter(pl.col("cancel_ts").is_null() | _GAVE_UP)
    )
    lost = requests.join(
        unanswered.open_get_sessions(timeline), on="session_id", how="left"
    ).with_columns(
        pick(
            (
                _OPEN | ((pl.col("status") == 202) & pl.col("get_open").fill_null(False)),
                _STILL_OPEN,
            ),
            (pl.col("unseen"), _UNSEEN),
            otherwise="",
        ).alias("note")
    )
    what = text("{method} {rpc_id}", method=pl.col("method").fill_null("?"))
    where = (
        pl.when(pl.col("incarnations").is_not_null())
        .then(text("its stream {carrier} ran {incarnations} incarnation(s), the last ending {how}",
                   how=pl.col("how").cast(pl.String).fill_null("never")))
        .otherwise(text("its HTTP {status} answer carried none"))
    )  # fmt: skip
    return emit(
        lost,
        severity=pick((pl.col("note") != "", "info"), otherwise="high"),
        title=text("No response to {what}", what=what),
        detail=text(
            "Session {session_id}: the client's request {what}{tool} (flow {flow_id}, replica "
            "{replica}) was accepted, but no response to it reached the client by the end of its "
            "incarnation chain or its session ({where}), and {cancelled}.{note} What to change:",
            what=what,
            tool=pick((pl.col("tool_name").is_null(), ""), otherwise=text(" (tool {tool_name})")),
            replica=or_unknown("replica"),
            where=where,
            cancelled=pick(
                (pl.col("cancel_ts").is_null(), "the client never cancelled it"),
                otherwise=text(
                    _GAVE_UP_TEXT,
                    ms=(pl.col("cancel_ts") - pl.col("end_ts")).dt.total_milliseconds(),
                ),
            ),
        ),
        remedy=REMEDY,
        flow_ids=pl.concat_list("flow_id"),
        stream_ids=pl.when(pl.col("incarnations").is_not_null())
        .then(pl.concat_list("carrier"))
        .otherwise(pl.lit([], dtype=pl.List(pl.String))),
        request_ids=pl.concat_list("rpc_id"),
        first_ts="ts",
        last_ts="ts",
    )


REMEDY: Final = (
    "keep a session-scoped authoritative event log that outlives connections and replicas so a "
    "resume replays the response, route resumes to the replica holding the stream (sticky routing "
    "on Mcp-Session-Id), and never end a request's stream before its response."
)


DETECTOR: Final[Detector] = Detector(
    id="lost-response",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
