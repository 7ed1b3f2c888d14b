"""The same side-effecting tools/call, same canonical arguments, sent again within `window_s`.

Flags a `tools/call` repeating one of the same client (in its session or its next one at the
same origin: same client ip and clientInfo) to the same server: same tool, same RFC 8785
canonical `arguments`, same or new id. High when the first call's exchange broke, got a 404, no
HTTP response or a 202, and no result had arrived before the repeat (a retry after loss: it may
have run twice, whether or not a `tools/list` names the tool); once the first result was
delivered, medium for a tool a captured `tools/list` names as side-effecting (a double submit)
and low for a tool none names (hints unknown: a deliberate re-run looks the same). A tool listed
without annotations is side-effecting. Must not flag read-only tools (`readOnlyHint`) or MRTR
legs (`inputResponses` / `requestState`, or a predecessor that returned InputRequiredResult);
idempotent tools (`idempotentHint`) are low, and their repeats are one finding per session, tool
and arguments (a client polling an idempotent tool would otherwise get one per call).
What to change: an idempotency key the server deduplicates on; resume a broken stream
(Last-Event-ID) or ask what ran instead of re-issuing; a repeat nothing lost: why the client
sent it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit, merged
from analyzer.timeline.tool_calls import PREVIOUS, previous_calls
from analyzer.wording import or_unknown, pick, seconds, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_DETAIL: Final = (
    "tools/call {tool_name} (request {prev_request_id}, flow {prev_flow_id}, replica "
    "{prev_replica}) was sent again with the same canonical arguments as request {request_id} "
    "(flow {flow_id}, replica {replica}) {gap} s later, {where}. The first exchange ended "
    "'{prev_first_outcome}'{lost}. {listed} What to change: give the tool an idempotency key the "
    "server deduplicates on; {remedy}"
)
_AFTER_LOSS: Final = (
    "after a broken stream, resume it with Last-Event-ID where the era allows (not 2026-07-28) "
    "or ask the server what ran, instead of re-issuing the call."
)
_NOTHING_LOST: Final = (
    "nothing was lost before this repeat, so look at why the client sent the same call again "
    "(a retry on a timeout, a double submit, a loop)."
)
_RUN_DETAIL: Final = (
    "tools/call {tool} was sent {calls} times with the same canonical arguments (requests "
    "{requests}) over {span} s. The tool is listed as idempotent: a repeat should be harmless. "
    "What to change: nothing if the repeats were meant; else look at why the client sends the "
    "same call again."
)


def detect(timeline: Timeline, *, window_s: float = 120.0) -> pl.LazyFrame:
    """One finding per repeated call, citing it and the call it repeats."""
    calls = previous_calls(timeline.tool_calls, timeline.sessions, timeline.exchanges)
    p = {c: pl.col(f"prev_{c}") for c in PREVIOUS}
    # "accepted": a 202 whose result was due on another stream (legacy SSE, a GET stream).
    lost = p["first_outcome"].is_in(("broken", "404", "no_response", "accepted")) & ~(
        p["result_delivered"] & (p["result_ts"] <= pl.col("ts"))
    ).fill_null(False)
    listed, idempotent = pl.col("tool_listed"), pl.col("idempotent_hint").fill_null(False)
    gap_s = (pl.col("ts") - p["ts"]).dt.total_milliseconds() / 1000
    detail = text(
        _DETAIL,
        prev_replica=or_unknown("prev_replica"),
        replica=or_unknown("replica"),
        gap=seconds(pl.col("ts") - p["ts"]),
        where=pick(
            (p["session_id"] == pl.col("session_id"), "in the same session"),
            otherwise=text("in the client's next session (first in {prev_session_id})"),
        ),
        lost=pick(
            (lost, " before its result reached the client: the tool may have run twice"),
            otherwise=": the client asked for a second execution",
        ),
        listed=pick(
            (~listed, "No captured tools/list names the tool, so its hints are unknown."),
            otherwise="The tool is listed as side-effecting (not read-only, not idempotent).",
        ),
        remedy=pick((lost, _AFTER_LOSS), otherwise=_NOTHING_LOST),
    )
    found = calls.filter(
        pl.col("tool_name").is_not_null()
        & (gap_s <= window_s)
        & (pl.col("rank") - p["rank"] <= 1)
        & ~pl.col("mrtr").fill_null(False)
        & ~p["input_required"].fill_null(False)
    )

    def repeats(of: pl.LazyFrame) -> pl.LazyFrame:
        return emit(
            of,
            severity=pick(
                (idempotent, "low"), (lost, "high"), (~listed, "low"), otherwise="medium"
            ),
            title=text(
                "tools/call {tool_name} {what}",
                what=pick(
                    (lost, "re-issued after its first call was lost: it may have run twice"),
                    otherwise="repeated with the same arguments",
                ),
            ),
            detail=detail,
            flow_ids=pl.concat_list(p["flow_id"], "flow_id"),
            stream_ids=pl.concat_list(p["stream_id"], "stream_id"),
            request_ids=pl.concat_list(p["request_id"], "request_id"),
            first_ts=p["ts"],
            last_ts="ts",
            extra=pl.concat_list("tool_name", "arguments_hash"),
        )

    # Idempotent repeats gather into one finding a run; an unlisted tool's low ones stay apart.
    calls_in_run = pl.col("flow_ids").list.len()  # one HTTP exchange a call (ids may repeat)
    tool = pl.col("fingerprint_extra").list.first()
    runs = merged(
        repeats(found.filter(idempotent)), ("flow_ids", "stream_ids", "request_ids")
    ).with_columns(
        text(
            "tools/call {tool} repeated with the same arguments ({calls} calls, idempotent)",
            tool=tool,
            calls=calls_in_run,
        ).alias("title"),
        text(
            _RUN_DETAIL,
            tool=tool,
            calls=calls_in_run,
            requests=pl.col("request_ids").list.join(", "),
            span=seconds(pl.col("last_ts") - pl.col("first_ts")),
        ).alias("detail"),
    )
    return pl.concat([repeats(found.filter(~idempotent)), runs], how="diagonal")


DETECTOR: Final[Detector] = Detector(
    id="repeated-tool-call", severity=Severity.MEDIUM, description=__doc__ or "", detect=detect
)
