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
from analyzer.wording import json_number

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_WHERE: Final = pl.format("cursor {} (resume flow {}, replica {})", "cursor", "r_flow", "r_replica")
_CARRIED: Final = (
    "After {} the stream had already carried {} message(s) ({}) that no incarnation delivered "
    "again."
)
_JUMPED: Final = (
    "The resume from {} restarted progress token {} at {} (event {}) while the client's last "
    "progress was {}, in steps of {}{}: about {} message(s) in between were never sent (the "
    "replay began after events its buffer no longer held)."
)
_SKIPPED: Final = (
    "The resume from {} went on at event {} of the stream's own id counter, {} past the cursor: "
    "no event of the capture carries the {} id(s) in between, so the replay began after "
    "messages the client never got."
)
_OWED: Final = (
    "The response to request {} never arrived on any of the stream's {} incarnation(s) nor "
    "anywhere else in the session; the last resume sent {}."
)


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
    carried = pl.format(_CARRIED, _WHERE, pl.col("lost").list.len(), pl.col("lost").list.join(", "))
    jumped = pl.format(
        _JUMPED, _WHERE, "token", json_number("p"), "event_id", json_number("p_last"),
        json_number("d"),
        pl.when(pl.col("even")).then(pl.lit("")).otherwise(pl.lit(" at least")),
        ((pl.col("p") - pl.col("p_last")) / pl.col("d") - 1).round().cast(pl.Int64),
    )  # fmt: skip
    past = pl.col("a_n") - pl.col("c_n")
    skipped = pl.format(_SKIPPED, _WHERE, "a_event_id", past, past - 1)
    owed = pl.format(_OWED, "request_id", "incarnations", _WHERE)
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
    opened = (
        pl.when(pl.col("request_id").is_not_null())
        .then(pl.format("{} request {}", pl.col("request_method").fill_null("?"), "request_id"))
        .otherwise(pl.lit("standalone GET stream"))
    )
    still_open = pl.col("last_end_how").is_null() | (pl.col("last_end_how") == "open_at_shutdown")
    detail = pl.format(
        "Stream {} ({}, opened on replica {}) was resumed but did not deliver what came after the "
        "client's cursor. {}{} What to change:",
        "stream_id",
        opened,
        pl.col("replica").fill_null("unknown"),
        "text",
        pl.when(still_open)
        .then(pl.lit(" The stream was still open at capture end: the replay may yet come."))
        .otherwise(pl.lit("")),
    )
    return found.join(timeline.streams.filter(~SESSIONLESS.fill_null(False)), on="stream_id").pipe(
        emit,
        # Carried or owed messages, an even progress jump, or progress and ids together: high.
        severity=pl.when(still_open)
        .then(pl.lit(Severity.INFO.value))
        .when(pl.col("sure"))
        .then(pl.lit(Severity.HIGH.value))
        .otherwise(pl.lit(Severity.MEDIUM.value)),
        title=pl.format("Stream {} lost messages after a resume", "stream_id"),
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
