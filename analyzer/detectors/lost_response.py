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
        pl.when(_OPEN | ((pl.col("status") == 202) & pl.col("get_open").fill_null(False)))
        .then(pl.lit(" Its stream was still open at capture end: the response may yet come."))
        .when("unseen")
        .then(
            pl.lit(
                " Part of its answer was not captured (a truncated or missing body, or "
                "a torn stream tail): the response may be there."
            )
        )
        .otherwise(pl.lit(""))
        .alias("note")
    )
    what = pl.format("{} {}", pl.col("method").fill_null("?"), pl.col("rpc_id"))
    where = (
        pl.when(pl.col("incarnations").is_not_null())
        .then(pl.format("its stream {} ran {} incarnation(s), the last ending {}", "carrier",
                        "incarnations", pl.col("how").cast(pl.String).fill_null("never")))
        .otherwise(pl.format("its HTTP {} answer carried none", "status"))
    )  # fmt: skip
    return emit(
        lost,
        severity=pl.when(pl.col("note") != "")
        .then(pl.lit(Severity.INFO.value))
        .otherwise(pl.lit(Severity.HIGH.value)),
        title=pl.format("No response to {}", what),
        detail=pl.format(
            "Session {}: the client's request {}{} (flow {}, replica {}) was accepted, but no "
            "response to it reached the client by the end of its incarnation chain or its "
            "session ({}), and {}.{} What to change:",
            "session_id",
            what,
            pl.when(pl.col("tool_name").is_not_null())
            .then(pl.format(" (tool {})", "tool_name"))
            .otherwise(pl.lit("")),
            "flow_id",
            pl.col("replica").fill_null("unknown"),
            where,
            pl.when(pl.col("cancel_ts").is_null())
            .then(pl.lit("the client never cancelled it"))
            .otherwise(
                pl.format(
                    "the client cancelled it only {} ms after the server had ended its stream "
                    "without the response and without an event id to resume from (it gave up "
                    "on a response that could no longer come)",
                    (pl.col("cancel_ts") - pl.col("end_ts")).dt.total_milliseconds(),
                )
            ),
            "note",
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
