"""Messages a resumed stream carried or owed after the client's cursor that never reached it.

Judged at the end of each logical stream's incarnation chain (DESIGN.md §2), for every resume
that became an incarnation of stream S (a GET whose Last-Event-ID S issued, answered with an
event stream). Carried: an event with an id that S sent after the cursor's position before the
resume, that no incarnation from the resume on delivered again (same id or same payload).
Skipped, in progress: the resume's first `notifications/progress` of a token jumps past the
client's last one (one before the cut is enough) by more than `progress_jump` times the token's
step: its smallest positive increment within an incarnation, on any of them, else 1 when every
value is an integer under an integer `total` (the progress counts steps). The replay began after
messages the client never saw, as an evicting buffer does. Skipped, in ids: the stream's ids are
a per-stream counter (one prefix, the number rising by one an event on the incarnation that
issued the cursor and on the answer: `e4`, `evt-000123`, `<stream>_<n>`, `17`) and the replay
went on past cursor + 1, while no event of the capture, on any stream or session, carries a
number in between (a counter the session's streams share skips legitimately), except in another
session that carries one of the resumed session's numbers too: a counter of its own. A replay whose
counter goes on at cursor + 1 skipped nothing, whatever its progress says. Owed: the response to
S's request never arrived, on any incarnation or anywhere in the session, and was not cancelled
(`subscriptions/listen` is never owed one). High for what was carried or owed, for a progress
jump in even steps, and for progress and ids together; medium for ids alone or a jump measured
against uneven steps (a step that only bounds the increments); info when S's last incarnation
was still open at capture end.
Must not flag: a replay still in progress at a later incarnation (later incarnations count),
2026-07-28 streams (closing one is its cancellation), streams never resumed (`lost-response`),
ids that are no per-stream counter (UUIDs, epoch-ms and random parts, one constant id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import losses
from analyzer.timeline.keys import SESSIONLESS
from analyzer.wording import json_number, or_unknown, pick, text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_WHERE: Final = text("cursor {cursor} (resume flow {r_flow}, replica {r_replica})")
_CARRIED: Final = (
    "After {where} the stream had already carried {n} message(s) ({lost}) that no incarnation "
    "delivered again."
)
_JUMPED: Final = (
    "The resume from {where} restarted progress token {token} at {p} (event {event_id}) while "
    "the client's last progress was {p_last}, in steps of {d}{at_least}: about {missed} "
    "message(s) in between were never sent (the replay began after events its buffer no longer "
    "held)."
)
_SKIPPED: Final = (
    "The resume from {where} went on at event {a_event_id} of the stream's own id counter, "
    "{past} past the cursor: no event of the capture carries the {between} id(s) in between, so "
    "the replay began after messages the client never got."
)
_OWED: Final = (
    "The response to request {request_id} never arrived on any of the stream's {incarnations} "
    "incarnation(s) nor anywhere else in the session; the last resume sent {where}."
)
_STILL_OPEN: Final = " The stream was still open at capture end: the replay may yet come."


def _part(text: pl.Expr, ids: str | None, level: pl.Expr, last: str = "r_ts") -> list[pl.Expr]:
    """A part's row for `losses.gathered`: evidence the cursor and `ids` on the cursor's and the
    resume's flows; an owed response (`ids` None) the last resume's cursor and flow."""
    flows = ("cursor_flow_id", "r_flow") if ids else ("r_flow",)
    return [
        pl.col("stream_id"),
        text.alias("text"),
        pl.concat_list("cursor", *([ids] if ids else [])).alias("event_ids"),
        pl.concat_list(*flows).alias("flow_ids"),
        pl.col("r_ts").alias("first_ts"),
        pl.col(last).alias("last_ts"),
        level.alias("level"),
    ]


def detect(timeline: Timeline, *, progress_jump: float = 1.5) -> pl.LazyFrame:
    """One finding per resumed stream that lost messages after a cursor."""
    resumes, counted, contiguous = losses.resumes(timeline)
    lost = pl.col("lost")
    carried = text(_CARRIED, where=_WHERE, n=lost.list.len(), lost=lost.list.join(", "))
    jumped = text(
        _JUMPED, where=_WHERE, p=json_number("p"), p_last=json_number("p_last"),
        d=json_number("d"), at_least=pick((pl.col("even"), ""), otherwise=" at least"),
        missed=((pl.col("p") - pl.col("p_last")) / pl.col("d") - 1).round().cast(pl.Int64),
    )  # fmt: skip
    past = pl.col("a_n") - pl.col("c_n")
    skipped = text(_SKIPPED, where=_WHERE, past=past, between=past - 1)
    owed = text(_OWED, where=_WHERE)
    # A jump measured against the increments themselves says high; one a step only bounds, medium.
    high, medium = pl.lit(losses.HIGH), pl.lit(losses.MEDIUM)
    even = pl.when(pl.col("even")).then(high).otherwise(medium)
    found = losses.gathered(
        (
            losses.carried(timeline).select(*_part(carried, "lost", high)),
            losses.progress_jumps(timeline, resumes.lazy(), contiguous.lazy(), progress_jump)
            .select(*_part(jumped, "event_id", even, last="ts")),
            losses.counter_skips(timeline, resumes.lazy(), counted)
            .select(*_part(skipped, "a_event_id", medium)),
            losses.owed(timeline, resumes.lazy())
            .select(*_part(owed, None, high, last="end_ts")),
        )
    )  # fmt: skip
    opened = pick(
        (pl.col("request_id").is_null(), "standalone GET stream"),
        otherwise=text(
            "{method} request {request_id}", method=pl.col("request_method").fill_null("?")
        ),
    )
    still_open = pl.col("last_end_how").is_null() | (pl.col("last_end_how") == "open_at_shutdown")
    detail = text(
        "Stream {stream_id} ({opened}, opened on replica {replica}) was resumed but did not "
        "deliver what came after the client's cursor. {text}{still_open} What to change:",
        opened=opened,
        replica=or_unknown("replica"),
        still_open=pick((still_open, _STILL_OPEN), otherwise=""),
    )
    return found.join(timeline.streams.filter(~SESSIONLESS.fill_null(False)), on="stream_id").pipe(
        emit,
        # Carried or owed messages, an even progress jump, or progress and ids together: high.
        severity=pick((still_open, "info"), (pl.col("sure"), "high"), otherwise="medium"),
        title=text("Stream {stream_id} lost messages after a resume"),
        detail=detail,
        remedy=REMEDY,
        flow_ids=pl.concat_list("stream_id", "flow_ids"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids="event_ids",
        request_ids=pl.concat_list("request_id"),
    )


REMEDY: Final = (
    "keep a session-scoped authoritative event log that outlives connections, buffers and "
    "replicas (or route resumes to the replica holding it), replay every event after the cursor "
    "contiguously, and answer a cursor you cannot honour with an error instead of 200."
)


DETECTOR: Final[Detector] = Detector(
    id="causal-gap", severity=Severity.HIGH, description=__doc__ or "", detect=detect, remedy=REMEDY
)
