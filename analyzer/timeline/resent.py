"""Messages the server sent more than once: the evidence `duplicate-response` names.

`responses` keys the responses whose request id recurs in their session by the request they
answer (`recurring` keeps the rows whose key recurs); `fresh_events` keeps the fresh (not
replayed) messages whose event id recurs in their session; `evidence` aggregates a group of
copies. Both read only what can recur, so the evidence lists are built for the few groups that
can become findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.timeline.answers import ANSWER, CARRIER
from analyzer.timeline.keys import SESSIONLESS
from analyzer.timeline.replays import foreign_session_events, key_hash, recurring_hashes

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

FRESH: Final = pl.col("incarnation").fill_null(0) == 0
"""Sent fresh: not a resume's replay."""


def evidence(key: pl.Expr, texts: pl.Expr) -> list[pl.Expr]:
    """The aggregations of one group of copies: its era, `key`, `texts` (as `what`), evidence
    in wire order and its times."""
    return [
        pl.col("era").first(),
        key.first().alias("key"),
        texts.alias("what"),
        pl.col("flow_id").sort_by("ts", "seq").unique(maintain_order=True).alias("flow_ids"),
        pl.col("stream_id")
        .sort_by("ts", "seq")
        .drop_nulls()
        .unique(maintain_order=True)
        .alias("stream_ids"),
        pl.col("event_id")
        .sort_by("ts", "seq")
        .drop_nulls()
        .unique(maintain_order=True)
        .alias("event_ids"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
    ]


def recurring(rows: pl.LazyFrame, *key: str) -> pl.LazyFrame:
    """The rows whose key recurs: only those can be in a group of two (a cheap pass over every
    row, so that the evidence lists are built for the few groups that can become findings).

    The pass, `recurring_hashes`, is collected first (a plan joining the rows to a key set it
    is still computing would hold them all until the set was complete); a collision lets a row
    through whose group then holds one row. A semi-join keeps the rows; when no key recurs
    (most captures: answer ids recur in resumes and reused ids only), none is read again."""
    keys = recurring_hashes(rows, *key).collect(engine="streaming")
    if keys.is_empty():
        return rows.clear()
    return rows.with_columns(key_hash(*key)).join(keys.lazy(), on="_key", how="semi").drop("_key")


def _placed(rows: pl.LazyFrame, timeline: Timeline) -> pl.LazyFrame:
    """`rows` with their carrier (stream, else flow) and their flow's era."""
    return rows.with_columns(CARRIER.alias("carrier")).join(
        timeline.exchanges.select("flow_id", "era"), on="flow_id", how="left"
    )


def responses(timeline: Timeline) -> pl.LazyFrame:
    """The responses (results and errors) whose request id recurs in their session, keyed.

    They are read from `Timeline.rpc_messages` (a few in a hundred messages). The key of both kinds
    of duplicate response, (session, `rkey`[, payload]), refines (session, request id): only a
    response whose request id recurs can be in a group of two, so the flow columns (carrier,
    era) are joined to those alone. `rkey` is the request answered: in 2026-07-28 traffic the
    exchange that carried the response, else the request it answers (`analyzer.timeline.answers`:
    ids recur in a session key, and two requests with one id, each answered, are not one request
    answered twice), else (no captured request) its id."""
    # An error with a null id (a transport-level refusal: "Session not found" after a server
    # restart, a missing session header) answers no request: `ANSWER` leaves it out.
    answers = recurring(timeline.rpc_messages.filter(ANSWER), "session_id", "rpc_id").collect(
        engine="streaming"
    )
    # A resume's answers that another session received too are another session's responses,
    # replayed by a store the sessions share: cross-session-replay's finding, not a second
    # answer of this session's request. Looked for among the recurring answers (a resume that
    # answers a request twice repeats its id), held in memory as both plans read them.
    foreign = foreign_session_events(answers.lazy(), timeline.sse_events, timeline.sessions)
    return (
        answers.lazy()
        .join(foreign, on=["session_id", "flow_id", "event_id"], how="anti")
        .pipe(_placed, timeline)
        .with_columns(
            pl.when(SESSIONLESS.fill_null(False))
            .then(pl.format("{}/{}", "carrier", "rpc_id"))
            .when(pl.col("answers").is_not_null())
            .then(pl.format("{}/{}", "answers", "rpc_id"))
            .otherwise("rpc_id")
            .alias("rkey")
        )
    )


def fresh_events(timeline: Timeline) -> pl.LazyFrame:
    """Every fresh server message with an event id, of the events whose id recurs in their
    session (`Timeline.recurring_events`), with its carrier and era: one message sent in two
    events is one of those (their messages are among `Timeline.replay_messages`)."""
    recurring = timeline.recurring_events.filter(FRESH).select("flow_id", "ordinal")
    # An id the session issued with several payloads names no one message (duplicate-event-id's
    # finding): equal payloads under it are equal payloads, as under fresh ids.
    naming_none = (
        timeline.recurring_events.group_by("session_id", "event_id")
        .agg(pl.struct("event", "payload_hash").n_unique().alias("_payloads"))
        .filter(pl.col("_payloads") > 1)
        .select("session_id", "event_id")
    )
    return (
        timeline.replay_messages.filter(
            (pl.col("direction") == "s2c") & FRESH
            & pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
        )
        .join(recurring, on=["flow_id", "ordinal"], how="semi")
        .join(naming_none, on=["session_id", "event_id"], how="anti", nulls_equal=True)
        .pipe(_placed, timeline)
    )  # fmt: skip
