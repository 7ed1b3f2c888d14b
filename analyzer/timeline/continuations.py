"""How the answer to a resume relates to what was due after its cursor: the evidence
`phantom-resume` judges.

A resume placed at its cursor (`Timeline.resumes_at_cursor`) owes the events its stream carried
after the cursor (`due`) or, when it had carried none, the response the stream still owed.
`unmet` keeps the resumes none of whose due came back; `continued` says which answers went on
with the stream's own messages instead; `told` which said the cursor was not honoured; `sent`
what the answers carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.timeline import payloads_of
from analyzer.timeline.counters import own_prefixes, resume_counters
from analyzer.timeline.progress import earlier_tokens

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

_HAS_ID: Final = pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
# An event type that names a stream reset or a new stream (any server's spelling of it).
_CONTROL_TYPE: Final = (
    r"(?i)(reset|restart|new[-_ .]?stream|stream[-_ .]?new|not[-_ .]?resumed"
    r"|resume[-_ .]?(failed|refused|rejected))"
)
_NOT_RESUMED: Final = pl.col("text").str.json_path_match("$.resumed") == "false"
_UNMET_COLUMNS: Final = ("r_flow", "stream_id", "cursor", "cursor_flow_id", "cursor_replica",
                         "answer_replica", "r_ts", "due", "owed")  # fmt: skip


def due(timeline: Timeline, resumes: pl.LazyFrame) -> pl.LazyFrame:
    """The events the resumed streams carried after the cursor that issue an id, by id and
    payload (placed once when the timeline was built)."""
    return timeline.after_cursor.join(resumes.select("r_flow"), on="r_flow", how="semi")


def answers(timeline: Timeline, resumes: pl.LazyFrame) -> pl.LazyFrame:
    """The answers' own events (among the resumed streams'), `r_flow` the answer: joined on
    their flow, not through every event of the stream."""
    return timeline.resumed_events.join(
        resumes.select("r_flow", "stream_id"),
        left_on=["flow_id", "stream_id"],
        right_on=["r_flow", "stream_id"],
    ).select(
        pl.col("flow_id").alias("r_flow"), "event_id", "payload_hash", "stream_pos", "id_only",
        "event", "data_hash", "incarnation",
    )  # fmt: skip


def unmet(
    timeline: Timeline, resumes: pl.LazyFrame, answer: pl.LazyFrame, due: pl.LazyFrame
) -> pl.LazyFrame:
    """The resumes none of whose due came (`due`: the event ids, or `owed`: the response):
    collected (they are few), so that what reads them reads only their answers."""
    # The answers' events are many, what was due few: the join keeps what was due in its table.
    # A due payload came back under any id; a due id with another payload is another message.
    came = answer.select("r_flow", "payload_hash").join(
        due.select("r_flow", "payload_hash"), on=["r_flow", "payload_hash"], how="semi"
    )
    due_events = due.group_by("r_flow").agg(
        pl.col("event_id").sort_by("stream_pos").unique(maintain_order=True).alias("due"),
        pl.all().exclude("event_id").first(),
    )
    return (
        pl.concat(
            [
                due_events.with_columns(pl.lit(False).alias("owed")).select(_UNMET_COLUMNS),
                _owed_only(timeline, resumes, due),
            ],
            how="vertical_relaxed",
        )
        .join(came.select("r_flow"), on="r_flow", how="anti")
        .collect(engine="streaming")
        .lazy()
    )


def told(timeline: Timeline, answer: pl.LazyFrame) -> pl.LazyFrame:
    """The answers (`r_flow`) that told the client its cursor was not honoured."""
    errors = timeline.rpc_messages.filter(
        (pl.col("direction") == "s2c") & (pl.col("kind") == "error")
    ).select(pl.col("flow_id").alias("r_flow"))
    typed = answer.filter(pl.col("event").str.contains(_CONTROL_TYPE).fill_null(False))
    # The payload texts are read only for the few answers asked about (none: no read at all).
    hashes = answer.select("data_hash").drop_nulls().unique().collect(engine="streaming")
    flagged = (
        payloads_of(timeline, hashes.lazy(), _NOT_RESUMED.alias("no"), text=False)
        if not hashes.is_empty()
        else pl.LazyFrame(schema={"data_hash": pl.String, "no": pl.Boolean})
    ).filter(pl.col("no").fill_null(False))
    said = answer.join(flagged.select("data_hash"), on="data_hash", how="semi")
    return pl.concat([errors, typed.select("r_flow"), said.select("r_flow")])


def continued(
    timeline: Timeline, resumes: pl.LazyFrame, answer: pl.LazyFrame, due: pl.LazyFrame
) -> pl.LazyFrame:
    """The answers (`r_flow`) that went on with the stream's own messages: progress on a token
    the stream carried before, the response to its request, or ids further along a counter
    whose prefix names the stream (`by_token`), or ids further along its per-stream counter
    (`by_counter`), unless they sent a due id with another payload."""
    answered = (
        answer.select("r_flow", "incarnation")
        .unique()
        .join(resumes.select("r_flow", "stream_id"), on="r_flow")
    )
    by_token = earlier_tokens(timeline.resumed_progress, answered)
    # An answer the server ended on its own without the owed response carried other messages
    # instead of it, counter or not; one cut short may still have been on its way to it.
    cut_short = resumes.filter((pl.col("answer_end_how") != "complete").fill_null(True))
    further = pl.col("per_stream") & (pl.col("a_n") > pl.col("c_n"))
    by_counter = resume_counters(cut_short, timeline.id_counters, timeline.incarnations).filter(
        further
    )
    counted = resume_counters(resumes, timeline.id_counters, timeline.incarnations).filter(further)
    by_prefix = counted.join(
        own_prefixes(
            counted.select("stream_id", "prefix"),
            timeline.streams.select("stream_id", "session_id"),
            timeline.id_counters,
        ),
        on=["stream_id", "prefix"],
        how="semi",
    ).select("r_flow")
    # The response to the stream's own request on the answer: a message only S carries.
    requests = timeline.streams.select("stream_id", pl.col("request_id").alias("rpc_id"))
    by_response = (
        timeline.rpc_messages.filter(
            (pl.col("direction") == "s2c") & (pl.col("kind") == "response")
        )
        .select(pl.col("flow_id").alias("r_flow"), "rpc_id")
        .join(resumes.select("r_flow", "stream_id"), on="r_flow")
        .join(requests, on=["stream_id", "rpc_id"], how="semi")
        .select("r_flow")
        .unique()
    )
    reused = (
        answer.select("r_flow", "event_id", "payload_hash")
        .join(
            due.select("r_flow", "event_id", pl.col("payload_hash").alias("was")),
            on=["r_flow", "event_id"],
        )
        .filter(pl.col("payload_hash").ne_missing(pl.col("was")))
    )
    return (
        pl.concat(
            [
                pl.concat([by_token, by_response, by_prefix]).with_columns(
                    pl.lit(True).alias("by_token")
                ),
                by_counter.select("r_flow", pl.lit(True).alias("by_counter")),
            ],
            how="diagonal",
        )
        .join(reused, on="r_flow", how="anti")
        .group_by("r_flow")
        .agg(pl.col("by_token", "by_counter").fill_null(False).any())
    )


def _owed_only(timeline: Timeline, resumes: pl.LazyFrame, due: pl.LazyFrame) -> pl.LazyFrame:
    """The resumes with no event due but the stream's response, which never came at or after
    them."""
    streams = timeline.streams.select("stream_id", "response_delivered", "response_ts")
    came_later = pl.col("response_delivered") & (pl.col("response_ts") >= pl.col("r_ts"))
    return (
        resumes.filter(pl.col("response_owed").fill_null(False))
        .join(due.select("r_flow"), on="r_flow", how="anti")
        .join(streams, on="stream_id")
        .filter(~came_later.fill_null(False))
        .select(
            "r_flow",
            "stream_id",
            "cursor",
            "cursor_flow_id",
            "cursor_replica",
            "answer_replica",
            "r_ts",
            pl.lit([], pl.List(pl.String)).alias("due"),
            pl.lit(True).alias("owed"),
        )
    )


def sent(answer: pl.LazyFrame, resumes: pl.LazyFrame) -> pl.LazyFrame:
    """What the answers of `resumes` sent: their event ids (`sent`, in stream order) and how many
    events carried a payload (`payloads`)."""
    return (
        answer.join(resumes.select("r_flow"), on="r_flow", how="semi")
        .group_by("r_flow")
        .agg(
            # The sort key filtered as the ids are: an id-less event (a JSON-RPC error
            # without `id:`) must not leave the two of different lengths.
            pl.col("event_id")
            .filter(_HAS_ID)
            .sort_by(pl.col("stream_pos").filter(_HAS_ID))
            .alias("sent"),
            (~pl.col("id_only")).sum().alias("payloads"),
        )
    )
