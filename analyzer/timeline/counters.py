"""Event-id counters: where an id ends in a counter, and how that counter moves per incarnation.

Ids are opaque; a counter is recognised only where an id ends in a run of 1 to 9 ASCII digits
(`17`, `e7`, `s2_17`), and never in a prefix holding an epoch in milliseconds (the TypeScript
SDK's `<streamId>_<epoch-ms>_<rand>`). `id_counters` summarises every incarnation's counters in
one pass over the events, which `build_timeline` makes once and stores: `counter-reset` reads the
few incarnations whose counter did not rise one by one from it instead of parsing every id again.
"""

from __future__ import annotations

from typing import Final

import polars as pl

__all__ = [
    "NOT_EPOCH",
    "carried_between",
    "id_counter",
    "id_counters",
    "own_prefixes",
    "ran_back",
    "ran_back_by_incarnation",
    "resume_counters",
    "went_on_at",
]

NOT_EPOCH: Final = ~pl.col("prefix").str.contains(r"\d{10}")
"""A counter `prefix` that holds no epoch in milliseconds (13 digits; 10 or more here)."""


def id_counter(column: str, prefix: str, n: str) -> list[pl.Expr]:
    """The `prefix` and counter `n` of the ids in `column`: the id's trailing run of ASCII
    digits when it has 1 to 9 of them (nulls otherwise), and what comes before it.

    String operations, no regex: a regex over every event id was most of what parsing them
    cost. (An SSE id holds no line break; digits of other scripts are no counter here: they do
    not parse as integers.)
    """
    text = pl.col(column)
    head = text.str.strip_chars_end("0123456789")
    digits = text.str.len_bytes() - head.str.len_bytes()
    counted = digits.is_between(1, 9)
    return [
        pl.when(counted).then(head).alias(prefix),
        pl.when(counted)
        .then(text.str.slice(head.str.len_chars()).cast(pl.Int64, strict=False))
        .alias(n),
    ]


def id_counters(events: pl.LazyFrame) -> pl.LazyFrame:
    """Per stream, incarnation and counter prefix of the SSE_EVENTS rows with an id (priming
    events included): `lo` and `hi`, the least and greatest `n - ordinal`, and `n`, the least
    counter. `lo == hi` means the counter rose by one an event; prefixes with an epoch left out.
    """
    offset = pl.col("n") - pl.col("ordinal")
    return (
        events.filter(pl.col("event_id").is_not_null() & (pl.col("event_id") != ""))
        .select("stream_id", "incarnation", "ordinal", *id_counter("event_id", "prefix", "n"))
        .filter(pl.col("n").is_not_null())
        .group_by("stream_id", "incarnation", "prefix")
        .agg(offset.min().alias("lo"), offset.max().alias("hi"), pl.col("n").min())
        .filter(NOT_EPOCH)  # a regex once a prefix, not once an event
    )


def resume_counters(
    resumes: pl.LazyFrame, counters: pl.LazyFrame, incarnations: pl.LazyFrame
) -> pl.LazyFrame:
    """Where each resume's cursor and answer stand in a per-stream id counter, read from the
    incarnations' counters alone (no pass over the events).

    `resumes`: `Timeline.resumes_at_cursor`; `counters`: `id_counters` output. One row per
    resume whose cursor ends in a counter (no epoch in its prefix) and whose answer carried a
    message (a new priming event alone replays nothing) and ids of the same prefix that rose by
    one an event: `r_flow, stream_id, prefix, c_n` (the cursor's counter),
    `a_n` (the answer's first, its least) and `per_stream`: the counter rose by one an event on
    the incarnation that issued the cursor too (an id scheme that is no counter, such as random
    digits after a prefix, or a session-wide counter interleaving streams, does not).
    """
    rising = counters.filter(pl.col("lo") == pl.col("hi"))
    cursor = (
        resumes.select("r_flow", "stream_id", "r_inc", "cursor_flow_id", "cursor")
        .with_columns(id_counter("cursor", "prefix", "c_n"))
        .filter(pl.col("c_n").is_not_null() & NOT_EPOCH)
        .join(
            incarnations.select(
                pl.col("flow_id").alias("cursor_flow_id"), pl.col("incarnation").alias("c_inc")
            ),
            on="cursor_flow_id",
        )
    )
    answer = rising.select(
        "stream_id", pl.col("incarnation").alias("r_inc"), "prefix", pl.col("n").alias("a_n")
    )
    issuer = rising.select(
        "stream_id",
        pl.col("incarnation").alias("c_inc"),
        "prefix",
        pl.lit(True).alias("per_stream"),
    )
    replayed = incarnations.filter(pl.col("payload_events") > 0).select(
        pl.col("flow_id").alias("r_flow")
    )
    return (
        cursor.join(replayed, on="r_flow", how="semi")
        .join(answer, on=["stream_id", "r_inc", "prefix"])
        .join(issuer, on=["stream_id", "c_inc", "prefix"], how="left")
        .select(
            "r_flow", "stream_id", "prefix", "c_n", "a_n", pl.col("per_stream").fill_null(False)
        )
    )


def carried_between(resumed: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """The resumes (`r_flow`) whose skipped counter numbers some event of the capture carries.

    `resumed`: `r_flow, r_session, prefix, c_n, a_n` (`resume_counters` rows with the resumed
    stream's session); `events`: `session_id, event_id`. A number strictly between the cursor's
    `c_n` and the answer's `a_n`, on any stream or session, means the counter is shared and
    skips legitimately; except in another session that carries one of the resumed session's
    own numbers too: it runs a counter of its own (ids are unique within a session, DESIGN.md
    §1; a shared counter issues each number once), and its numbers say nothing of this one's.
    """
    resumed = resumed.cache()  # read three times below
    # Each session's numbers of the resumed counters' prefixes, once each.
    numbered = (
        events.select("session_id", *id_counter("event_id", "prefix", "n"))
        .join(resumed.select("prefix").unique(), on="prefix", how="semi")
        .unique()
        .cache()  # read three times below
    )
    own = numbered.join(
        resumed, left_on=["session_id", "prefix"], right_on=["r_session", "prefix"]
    ).select("r_flow", pl.col("session_id").alias("r_session"), "prefix", "n")
    counting_alone = (
        numbered.join(own, on=["prefix", "n"])
        .filter(pl.col("session_id") != pl.col("r_session"))
        .select("r_flow", "session_id")
        .unique()
    )
    return (
        numbered.join(resumed, on="prefix")
        .filter((pl.col("n") > pl.col("c_n")) & (pl.col("n") < pl.col("a_n")))
        .join(counting_alone, on=["r_flow", "session_id"], how="anti")
        .select("r_flow")
    )


def went_on_at(skips: pl.LazyFrame, answers: pl.LazyFrame) -> pl.LazyFrame:
    """The id each answer went on at (`r_flow`, `a_event_id`): its first event whose counter is
    the `prefix` and `a_n` of `skips` (`resume_counters` rows); `answers`: SSE_EVENTS rows
    holding those answers' events (`Timeline.resumed_events`)."""
    wanted = skips.select(pl.col("r_flow").alias("flow_id"), "prefix", pl.col("a_n").alias("n"))
    return (
        answers.join(wanted.select("flow_id"), on="flow_id", how="semi")
        .select("flow_id", "ordinal", "event_id", *id_counter("event_id", "prefix", "n"))
        .join(wanted, on=["flow_id", "prefix", "n"])
        .group_by(pl.col("flow_id").alias("r_flow"))
        .agg(pl.col("event_id").sort_by("ordinal").first().alias("a_event_id"))
    )


def own_prefixes(
    candidates: pl.LazyFrame, streams: pl.LazyFrame, counters: pl.LazyFrame
) -> pl.LazyFrame:
    """The `candidates` (`stream_id, prefix`: counter prefixes) that name their stream: no
    other stream of the session carries the prefix, and another one carries counter ids of its
    own. A session-wide counter (`17`, `evt-000017`) puts its prefix on every stream; with one
    stream, nothing tells. `streams`: `stream_id, session_id`; `counters`: `id_counters`."""
    asked = candidates.unique().join(streams, on="stream_id")
    # The counters of the asked sessions' other streams (a join on the few asked sessions: a
    # UUID ending in digits is a prefix of its own, so the table can hold a row an event).
    others = (
        counters.select(pl.col("stream_id").alias("other"), pl.col("prefix").alias("p"))
        .join(streams.rename({"stream_id": "other"}), on="other")
        .join(asked, on="session_id")
        .filter(pl.col("other") != pl.col("stream_id"))
    )
    return (
        others.group_by("stream_id", "prefix")
        .agg((pl.col("p") == pl.col("prefix")).any().alias("shared"))
        .filter(~pl.col("shared"))
        .select("stream_id", "prefix")
    )


_INCARNATION: Final = ("stream_id", "incarnation")


def ran_back(
    events: pl.LazyFrame, incarnations: pl.LazyFrame, counters: pl.LazyFrame
) -> pl.LazyFrame:
    """The SSE_EVENTS rows (`events`) whose counter went back within their incarnation: at or
    below the incarnation's cursor (`at_cursor`: a resume goes back to it legitimately, never
    below) or below the highest one already sent on it, in streams where that prefix's counter
    rises between neighbours somewhere. Each with its incarnation's `cursor` and `replica`, and
    whether its id was issued earlier in the session, in wire order: with this payload
    (`exact`, a replay) or at all (`reused`). `counters`: `id_counters`."""
    cursors = incarnations.select(
        *_INCARNATION, "cursor", "replica", *id_counter("cursor", "c_prefix", "c_n")
    )
    with_id = events.filter(pl.col("event_id").is_not_null() & (pl.col("event_id") != ""))

    def counted(events: pl.LazyFrame) -> pl.LazyFrame:
        return events.with_columns(*id_counter("event_id", "prefix", "n")).filter(
            pl.col("n").is_not_null() & NOT_EPOCH
        )

    # Only a stream where some incarnation's counter is not `ordinal + constant` can run back
    # within an incarnation (`n - ordinal` constant means strictly rising), and only one whose
    # counter reaches down to its cursor's can go back to it: the summary of every
    # incarnation's counters names those few streams before any sort or window sees their
    # events.
    suspect = (
        counters.join(
            # An incarnation without a cursor can meet no cursor here (most have none).
            cursors.filter(pl.col("cursor").is_not_null()).select(*_INCARNATION, "c_prefix", "c_n"),
            on=list(_INCARNATION),
            how="left",
        )
        .filter(
            (pl.col("lo") != pl.col("hi"))
            | ((pl.col("c_prefix") == pl.col("prefix")) & (pl.col("n") <= pl.col("c_n"))).fill_null(
                False
            )
        )
        .select("stream_id")
        .unique()
        .collect(engine="streaming")
    )
    if suspect.is_empty():  # no stream can have gone back (the usual case): no more passes
        with_id = pl.LazyFrame(schema=with_id.collect_schema())
    ids = (
        counted(with_id.join(suspect.lazy(), on="stream_id", how="semi"))
        .sort("stream_id", "incarnation", "ordinal")
        .with_columns(
            pl.col("n").cum_max().shift(1).over(*_INCARNATION, "prefix").alias("high"),
            (pl.col("n").diff() > 0).over(*_INCARNATION, "prefix").alias("rises"),
        )
        .join(cursors, on=list(_INCARNATION), how="left")
    )
    from_cursor = pl.when(pl.col("c_prefix") == pl.col("prefix")).then(pl.col("c_n"))
    back = pl.col("n") <= pl.max_horizontal("high", from_cursor)
    went_back = (
        ids.filter(pl.col("rises").fill_null(False).any().over("stream_id", "prefix"))
        .filter(back.fill_null(False))
        .with_columns((pl.col("n") <= from_cursor).fill_null(False).alias("at_cursor"))
    )
    # Only the ids that went back are looked up (all their issues carry the same counter).
    issues = (
        with_id.join(
            went_back.select("session_id", "event_id"),
            on=["session_id", "event_id"],
            how="semi",
            nulls_equal=True,
        )
        .pipe(counted)  # after the semi-join: the ids are parsed for the few rows it keeps
        .sort("ts", "seq", "ordinal")
        .select(
            "flow_id",
            "ordinal",
            (pl.int_range(pl.len()).over("session_id", "event_id", "payload_hash") > 0).alias(
                "exact"
            ),
            (pl.int_range(pl.len()).over("session_id", "event_id") > 0).alias("reused"),
        )
    )
    return went_back.join(issues, on=["flow_id", "ordinal"], how="left")


def ran_back_by_incarnation(
    events: pl.LazyFrame, incarnations: pl.LazyFrame, counters: pl.LazyFrame
) -> pl.LazyFrame:
    """`ran_back`'s rows gathered per incarnation (`session_id`, `stream_id`, `incarnation`), in
    wire order: the ids that went back (`back`), those that are no exact replay (`new`), whether
    one of those was issued earlier in the session (`collides`: with another payload), whether
    every one went back to the cursor (`below_cursor`), `first_ts` and `last_ts`, and the
    incarnation's `cursor`, `flow_id` and `replica`."""
    incarnation = ("stream_id", "incarnation")
    return (
        ran_back(events, incarnations, counters)
        .sort(*incarnation, "ordinal")
        .group_by("session_id", *incarnation, maintain_order=True)
        .agg(
            pl.col("event_id").alias("back"),
            pl.col("event_id").filter(~pl.col("exact")).alias("new"),
            (pl.col("reused") & ~pl.col("exact")).any().alias("collides"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
            pl.col("at_cursor").all().alias("below_cursor"),
            pl.col("cursor", "flow_id", "replica").first(),
        )
    )
