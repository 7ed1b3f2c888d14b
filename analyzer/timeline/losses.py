"""What a resumed stream lost after the client's cursor: the evidence `causal-gap` names.

Four kinds, each a frame of one row a resume (DESIGN.md §2, §5): events the stream carried after
the cursor that no incarnation delivered again (`carried`), a progress token the replay restarted
past the client's last value (`progress_jumps`), a per-stream id counter the replay went on past
cursor + 1 (`counter_skips`), and a response the stream still owed (`owed`). `gathered` makes one
row a stream of them. Resumes are read as `Timeline.resumes_at_cursor` places them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.timeline import payloads_of
from analyzer.timeline.answers import CANCELLATION, REQUEST
from analyzer.timeline.counters import carried_between, resume_counters, went_on_at
from analyzer.timeline.progress import (
    first_of_incarnation,
    needing_total,
    settled_steps,
    token_steps,
)

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REPLICA: Final = pl.col("answer_replica").fill_null("unknown").alias("r_replica")
# What each kind of evidence says alone (`level`); progress and counter ids together say high.
HIGH: Final = 2
MEDIUM: Final = 1
_PROGRESS: Final = 1  # the rank of `progress_jumps` among the parts `gathered` takes
_COUNTER: Final = 2  # the rank of `counter_skips`


def resumes(tl: Timeline) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The resumes (few, placed at their cursor), their counters (`resume_counters`), and those
    whose per-stream counter went on at cursor + 1 (`r_flow`): collected, as every part reads
    them."""
    found = tl.resumes_at_cursor.with_columns(REPLICA).collect(engine="streaming")
    counted = resume_counters(found.lazy(), tl.id_counters, tl.incarnations).collect(
        engine="streaming"
    )
    contiguous = counted.filter(pl.col("per_stream") & (pl.col("a_n") == pl.col("c_n") + 1)).select(
        "r_flow"
    )
    return found, counted, contiguous


def _again(prefix: str) -> pl.Expr:
    """Delivered again by `prefix` ("id" or "payload"): some event of the stream with the same
    id (or payload) on the resume's incarnation or a later one, or at or after its request.
    Both thresholds are monotone, so the latest such incarnation and time say it
    (`analyzer.timeline.cursors.LATEST_DELIVERY`, kept in `Timeline.after_cursor`)."""
    return (
        (pl.col(f"{prefix}_last_inc") >= pl.col("r_inc"))
        | (pl.col(f"{prefix}_last_ts") >= pl.col("r_ts"))
    ).fill_null(False)


def carried(tl: Timeline) -> pl.LazyFrame:
    """Per resume, the events on the wire after the cursor, before the resume, that no
    incarnation delivered again (`lost`, in stream order)."""
    return (
        tl.after_cursor.with_columns(REPLICA)
        .filter(~_again("id") & ~_again("payload"))
        .group_by("stream_id", "r_flow", "cursor", "cursor_flow_id", "r_replica", "r_ts")
        .agg(pl.col("event_id").sort_by("stream_pos").unique(maintain_order=True).alias("lost"))
    )


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


def progress_jumps(
    tl: Timeline, resumes: pl.LazyFrame, contiguous: pl.LazyFrame, jump: float
) -> pl.LazyFrame:
    """Per resume and token, the resume's first progress value `p` when it jumps past the
    client's last one before the cursor, `p_last`, by more than `jump` steps `d` (`even`: the
    step is the increments' own, else it only bounds them). A resume whose per-stream counter
    ids went on at cursor + 1 (`contiguous`) lost nothing, whatever its progress says."""
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
    return (
        resumes.join(contiguous, on="r_flow", how="anti")
        .join(firsts, on=["stream_id", "r_inc"])  # one row a resume and token
        .join(last_before, on=["r_flow", "gid"])
        .join(step.select("gid", "d", "even"), on="gid")
        .filter(pl.col("p") - pl.col("p_last") > jump * pl.col("d"))
    )


def counter_skips(tl: Timeline, resumes: pl.LazyFrame, counted: pl.DataFrame) -> pl.LazyFrame:
    """The resumes whose replay of a per-stream counter started past cursor + 1 (`c_n`, `a_n`;
    the id it went on at, `a_event_id`), when no event of the capture carries a number in
    between (`carried_between`: a counter the session's streams, or the server's sessions,
    share skips on each of them legitimately)."""
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
    # The id the replay went on at, for the evidence (read among those few answers' events).
    went_on = went_on_at(skips.lazy(), answers)
    return (
        skips.lazy()
        .join(seen, on="r_flow", how="anti")
        .join(went_on, on="r_flow")
        .join(resumes, on=["r_flow", "stream_id"])
    )


def owed(tl: Timeline, resumes: pl.LazyFrame) -> pl.LazyFrame:
    """The resumed request streams whose response never arrived anywhere and was not cancelled,
    with their last resume."""
    # Answered: the stream's request row says whether an answer to it came at or after it
    # (`analyzer.timeline.answers`).
    answered = tl.rpc_messages.filter(REQUEST & pl.col("answered")).select(
        "stream_id", pl.col("rpc_id").alias("request_id")
    )
    cancels = tl.rpc_messages.filter(CANCELLATION).select(
        "session_id", pl.col("cancel_id").alias("request_id")
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
    )


def gathered(parts: Sequence[pl.LazyFrame]) -> pl.LazyFrame:
    """One row a stream of the parts (`stream_id`, `text`, `event_ids`, `flow_ids`, `first_ts`,
    `last_ts`, `level`; in the order carried, progress, counter, owed): their texts joined and
    evidence concatenated in that order and by time, and `sure` when one says high alone or
    progress and counter ids say it together.

    Each part is collected on its own, one after the other: as one plan, the streaming engine
    ran the parts together and held all their caches at once."""
    rows = pl.concat(
        [
            part.with_columns(pl.lit(rank).alias("rank")).collect(engine="streaming")
            for rank, part in enumerate(parts)
        ]
    ).lazy()
    return rows.group_by("stream_id").agg(
        pl.col("text").sort_by("rank", "first_ts").str.join(" "),
        pl.col("event_ids", "flow_ids")
        .sort_by("rank", "first_ts")
        .list.explode(keep_nulls=False, empty_as_null=False),
        pl.col("first_ts").min(),
        pl.col("last_ts").max(),
        (
            (pl.col("level").max() == HIGH)
            | ((pl.col("rank") == _PROGRESS).any() & (pl.col("rank") == _COUNTER).any())
        ).alias("sure"),
    )
