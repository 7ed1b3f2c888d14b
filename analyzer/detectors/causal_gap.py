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

# Longer than the 80 lines of STYLE.md item 8: four kinds of evidence (carried, skipped in
# progress, skipped in ids, owed) each need their own joins, and one finding per stream must
# gather them.

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit
from analyzer.timeline import payloads_of
from analyzer.timeline.answers import CANCELLATION, REQUEST
from analyzer.timeline.counters import carried_between, resume_counters, went_on_at
from analyzer.timeline.keys import SESSIONLESS
from analyzer.timeline.progress import (
    first_of_incarnation,
    needing_total,
    settled_steps,
    token_steps,
)

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_WHERE: Final = pl.format("cursor {} (resume flow {}, replica {})", "cursor", "r_flow", "r_replica")
_REPLICA: Final = pl.col("answer_replica").fill_null("unknown").alias("r_replica")
# What each kind of evidence says alone (`level`); progress and counter ids together say high.
_HIGH: Final = 2
_MEDIUM: Final = 1
_PROGRESS: Final = 1
_COUNTER: Final = 2


def _number(name: str) -> pl.Expr:
    """A float as JSON wrote it: 6.0 as 6."""
    x = pl.col(name)
    return pl.when(x % 1 == 0).then(x.cast(pl.Int64).cast(pl.String)).otherwise(x.cast(pl.String))


def _part(text: pl.Expr, ids: pl.Expr, flows: pl.Expr, first: str, last: str) -> list[pl.Expr]:
    return [
        pl.col("stream_id"),
        text.alias("text"),
        ids.alias("event_ids"),
        flows.alias("flow_ids"),
        pl.col(first).alias("first_ts"),
        pl.col(last).alias("last_ts"),
    ]


def _again(prefix: str) -> pl.Expr:
    """Delivered again by `prefix` ("id" or "payload"): some event of the stream with the same
    id (or payload) on the resume's incarnation or a later one, or at or after its request.
    Both thresholds are monotone, so the latest such incarnation and time say it
    (`analyzer.timeline.cursors.LATEST_DELIVERY`, kept in `Timeline.after_cursor`)."""
    return (
        (pl.col(f"{prefix}_last_inc") >= pl.col("r_inc"))
        | (pl.col(f"{prefix}_last_ts") >= pl.col("r_ts"))
    ).fill_null(False)


def _carried(tl: Timeline) -> pl.LazyFrame:
    """Events on the wire after the cursor, before the resume, never delivered again."""
    lost = (
        tl.after_cursor.with_columns(_REPLICA)
        .filter(~_again("id") & ~_again("payload"))
        .group_by("stream_id", "r_flow", "cursor", "cursor_flow_id", "r_replica", "r_ts")
        .agg(pl.col("event_id").sort_by("stream_pos").unique(maintain_order=True).alias("lost"))
    )
    text = pl.format(
        "After {} the stream had already carried {} message(s) ({}) that no "
        "incarnation delivered again.",
        _WHERE,
        pl.col("lost").list.len(),
        pl.col("lost").list.join(", "),
    )
    ids, flows = pl.concat_list("cursor", "lost"), pl.concat_list("cursor_flow_id", "r_flow")
    return lost.select(*_part(text, ids, flows, "r_ts", "r_ts"), pl.lit(_HIGH).alias("level"))


def _steps(tl: Timeline, progress: pl.LazyFrame) -> pl.LazyFrame:
    """Each progress group's step (`analyzer.timeline.progress`), reading a payload's `total`
    only for the groups whose increments say nothing."""
    steps = token_steps(progress)
    wanted = needing_total(steps).collect(engine="streaming")
    total = pl.col("text").str.json_path_match("$.params.total").cast(pl.Float64, strict=False)
    totals = (
        payloads_of(tl, wanted.lazy(), total.alias("total"), text=False)
        if not wanted.is_empty()  # no token without increments: no payload read
        else pl.LazyFrame(schema={"data_hash": pl.String, "total": pl.Float64})
    )
    return settled_steps(steps, totals)


def _skipped(
    tl: Timeline, resumes: pl.LazyFrame, contiguous: pl.LazyFrame, jump: float
) -> pl.LazyFrame:
    """Resumes whose first progress value jumps past the client's last by more than a step
    (a resume whose per-stream counter ids went on at cursor + 1, `contiguous`, lost nothing)."""
    # The progress of the resumed streams in order of stream, token and position: the
    # increments, the as-of join and each incarnation's first value below read that order.
    progress = tl.progress.cache()  # read three times: once
    step = _steps(tl, progress).cache()  # read by `last_before` and `jumps`: computed once
    # Each resume meets its stream's progress twice: the client's last progress before the
    # cursor, per token with a step (an as-of join on the position: joining every resume to
    # every progress row of its stream cost k times them for a stream resumed k times), and the
    # first on the resume's incarnation.
    last_before = (
        resumes.join(step.select("stream_id", "gid"), on="stream_id")
        .sort("c_pos")
        .join_asof(
            progress.select("gid", "stream_pos", pl.col("p").alias("p_last")),
            left_on="c_pos",
            right_on="stream_pos",
            by="gid",
            strategy="backward",
            check_sortedness=False,  # both sorted by position within each stream and token
        )
        .filter(pl.col("p_last").is_not_null())
        .select("r_flow", "gid", "p_last")
    )
    firsts = first_of_incarnation(progress).rename({"incarnation": "r_inc"})
    jumps = (
        resumes.join(contiguous, on="r_flow", how="anti")
        .join(firsts, on=["stream_id", "r_inc"])  # one row a resume and token
        .join(last_before, on=["r_flow", "gid"])
        .join(step.select("gid", "d", "even"), on="gid")
        .filter(pl.col("p") - pl.col("p_last") > jump * pl.col("d"))
    )
    missing = ((pl.col("p") - pl.col("p_last")) / pl.col("d") - 1).round().cast(pl.Int64)
    text = pl.format(
        "The resume from {} restarted progress token {} at {} (event {}) while the "
        "client's last progress was {}, in steps of {}{}: about {} message(s) in "
        "between were never sent (the replay began after events its buffer no "
        "longer held).",
        _WHERE,
        "token",
        _number("p"),
        "event_id",
        _number("p_last"),
        _number("d"),
        pl.when(pl.col("even")).then(pl.lit("")).otherwise(pl.lit(" at least")),
        missing,
    )
    ids, flows = pl.concat_list("cursor", "event_id"), pl.concat_list("cursor_flow_id", "r_flow")
    level = pl.when(pl.col("even")).then(pl.lit(_HIGH)).otherwise(pl.lit(_MEDIUM))
    return jumps.select(*_part(text, ids, flows, "r_ts", "ts"), level.alias("level"))


def _counter_skips(tl: Timeline, resumes: pl.LazyFrame, counted: pl.DataFrame) -> pl.LazyFrame:
    """Resumes whose replay of a per-stream counter started past cursor + 1, when no event of
    the capture carries a number in between (`carried_between`: a counter the session's
    streams, or the server's sessions, share skips on each of them legitimately)."""
    skips = counted.filter(pl.col("per_stream") & (pl.col("a_n") > pl.col("c_n") + 1))
    events = tl.sse_events.select("session_id", "event_id").filter(pl.col("event_id").is_not_null())
    answers = tl.resumed_events
    if skips.is_empty():  # the common case: no pass over every event id
        events, answers = events.clear(), answers.clear()
    resumed = (
        skips.lazy()
        .join(
            tl.streams.select("stream_id", pl.col("session_id").alias("r_session")), on="stream_id"
        )
        .select("r_flow", "r_session", "prefix", "c_n", "a_n")
    )
    seen = carried_between(resumed, events)
    text = pl.format(
        "The resume from {} went on at event {} of the stream's own id counter, {} past the "
        "cursor: no event of the capture carries the {} id(s) in between, so the replay began "
        "after messages the client never got.",
        _WHERE,
        "a_event_id",
        pl.col("a_n") - pl.col("c_n"),
        pl.col("a_n") - pl.col("c_n") - 1,
    )
    # The id the replay went on at, for the evidence (read among those few answers' events).
    went_on = went_on_at(skips.lazy(), answers)
    ids, flows = pl.concat_list("cursor", "a_event_id"), pl.concat_list("cursor_flow_id", "r_flow")
    return (
        skips.lazy()
        .join(seen, on="r_flow", how="anti")
        .join(went_on, on="r_flow")
        .join(resumes, on=["r_flow", "stream_id"])
        .select(*_part(text, ids, flows, "r_ts", "r_ts"), pl.lit(_MEDIUM).alias("level"))
    )


def _owed(tl: Timeline, resumes: pl.LazyFrame) -> pl.LazyFrame:
    """Resumed request streams whose response never arrived anywhere and was not cancelled."""
    # Answered: the stream's request row says whether an answer to it came at or after it
    # (`analyzer.timeline.answers`).
    answered = tl.rpc_messages.filter(REQUEST & pl.col("answered")).select(
        "stream_id", pl.col("rpc_id").alias("request_id")
    )
    cancels = tl.rpc_messages.filter(CANCELLATION).select(
        "session_id", pl.col("cancel_id").alias("request_id")
    )
    text = pl.format(
        "The response to request {} never arrived on any of the stream's {} "
        "incarnation(s) nor anywhere else in the session; the last resume sent {}.",
        "request_id",
        "incarnations",
        _WHERE,
    )
    return (
        tl.streams.filter(
            (pl.col("kind") == "post")
            & pl.col("request_id").is_not_null()
            # A listen request's stream is answered only when the client ends it.
            & (pl.col("request_method") != "subscriptions/listen").fill_null(True)
            & ~pl.col("response_delivered").fill_null(False)
        )
        .join(resumes.group_by("stream_id").agg(pl.all().sort_by("r_inc").last()), on="stream_id")
        .join(answered, on=["stream_id", "request_id"], how="anti")
        .join(cancels, on=["session_id", "request_id"], how="anti")
        .select(
            *_part(text, pl.concat_list("cursor"), pl.concat_list("r_flow"), "r_ts", "end_ts"),
            pl.lit(_HIGH).alias("level"),
        )
    )


def detect(timeline: Timeline, *, progress_jump: float = 1.5) -> pl.LazyFrame:
    """One finding per resumed stream that lost messages after a cursor."""
    # The resumes (few, placed at their cursor when the timeline was built) and each part are
    # collected here, one after the other: as one plan, the streaming engine ran the parts
    # together and held all their caches at once. `_carried` reads what was delivered again
    # from `Timeline.after_cursor`.
    resumes = timeline.resumes_at_cursor.with_columns(_REPLICA).collect(engine="streaming")
    counted = resume_counters(resumes.lazy(), timeline.id_counters, timeline.incarnations).collect(
        engine="streaming"
    )
    contiguous = counted.filter(pl.col("per_stream") & (pl.col("a_n") == pl.col("c_n") + 1)).select(
        "r_flow"
    )
    found = (
        _carried(timeline),
        _skipped(timeline, resumes.lazy(), contiguous.lazy(), progress_jump),
        _counter_skips(timeline, resumes.lazy(), counted),
        _owed(timeline, resumes.lazy()),
    )
    parts = pl.concat(
        [
            part.with_columns(pl.lit(rank).alias("rank")).collect(engine="streaming")
            for rank, part in enumerate(found)
        ]
    ).lazy()
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
    return (
        parts.group_by("stream_id")
        .agg(
            pl.col("text").sort_by("rank", "first_ts").str.join(" "),
            pl.col("event_ids", "flow_ids")
            .sort_by("rank", "first_ts")
            .list.explode(keep_nulls=False, empty_as_null=False),
            pl.col("first_ts").min(),
            pl.col("last_ts").max(),
            (
                (pl.col("level").max() == _HIGH)
                | ((pl.col("rank") == _PROGRESS).any() & (pl.col("rank") == _COUNTER).any())
            ).alias("sure"),
        )
        .join(timeline.streams.filter(~SESSIONLESS.fill_null(False)), on="stream_id")
        .pipe(
            emit,
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
    )


REMEDY: Final = (
    "keep a session-scoped authoritative event log that outlives connections, buffers and "
    "replicas (or route resumes to the replica holding it), replay every event after the cursor "
    "contiguously, and answer a cursor you cannot honour with an error instead of 200."
)


DETECTOR: Final[Detector] = Detector(
    id="causal-gap",
    severity=Severity.HIGH,
    description=__doc__ or "",
    detect=detect,
    remedy=REMEDY,
)
