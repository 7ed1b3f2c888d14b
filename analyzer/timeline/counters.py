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

__all__ = ["NOT_EPOCH", "id_counter", "id_counters", "resume_counters"]

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
    resumes: pl.LazyFrame,
    events: pl.LazyFrame,
    counters: pl.LazyFrame,
    incarnations: pl.LazyFrame,
) -> pl.LazyFrame:
    """Where each resume's cursor and answer stand in a per-stream id counter.

    `resumes`: `Timeline.resumes_at_cursor`; `events`: `Timeline.resumed_events`; `counters`:
    `id_counters` output. One row per resume whose cursor ends in a counter (no epoch in its
    prefix) and whose answer issued an id with the same prefix: `r_flow, stream_id, prefix, c_n`
    (the cursor's counter), `a_n` and `a_event_id` (the answer's first such id, priming events
    left out: a replay starts with a message) and `per_stream`: the counter rose by one an event
    on the incarnation that issued the cursor and on the answer (an id scheme that is no counter,
    such as a UUID ending in digits, or a session-wide counter interleaving streams, does not).
    """
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
    issued = pl.col("event_id").is_not_null() & (pl.col("event_id") != "") & ~pl.col("id_only")
    answer = (
        events.join(cursor.select(pl.col("r_flow").alias("flow_id")), on="flow_id", how="semi")
        .filter(issued)
        .select("flow_id", "ordinal", "event_id", *id_counter("event_id", "a_prefix", "a_n"))
        .join(
            cursor.select(pl.col("r_flow").alias("flow_id"), pl.col("prefix").alias("a_prefix")),
            on=["flow_id", "a_prefix"],
            how="semi",
        )
        .group_by(pl.col("flow_id").alias("r_flow"))
        .agg(
            pl.col("a_n").sort_by("ordinal").first(),
            pl.col("event_id").sort_by("ordinal").first().alias("a_event_id"),
        )
    )
    rising = counters.filter(pl.col("lo") == pl.col("hi")).select(
        "stream_id", "incarnation", "prefix", pl.lit(True).alias("_rising")
    )
    found = cursor.join(answer, on="r_flow")
    for inc, name in (("c_inc", "_c_rising"), ("r_inc", "_r_rising")):
        found = found.join(
            rising.rename({"incarnation": inc, "_rising": name}),
            on=["stream_id", inc, "prefix"],
            how="left",
        )
    per_stream = pl.col("_c_rising").fill_null(False) & pl.col("_r_rising").fill_null(False)
    return found.select(
        "r_flow", "stream_id", "prefix", "c_n", "a_n", "a_event_id", per_stream.alias("per_stream")
    )
