"""The few SSE events that replay judgements read (ids issued more than once, resumed streams)
and the messages those events carried.

Most events of a capture are sent once on a stream nobody resumed. The detectors that judge
replays (duplicate ids and responses, replays across streams, gaps after a cursor, phantom
resumes) look only at the events whose id recurs in their session or whose stream a resume
continued, and at their messages: selecting those takes a pass over every event and every
message, which `build_timeline` makes once and stores, instead of each detector making its own
on every analysis. `foreign_session_events` is the exception, read when detecting: the events a
resume replayed from another session, which two detectors share and which are seldom there.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from analyzer.timeline.answers import ANSWER

__all__ = [
    "INCARNATION",
    "ISSUED",
    "RECURRING_EVENT_COLUMNS",
    "REPLAY_MESSAGE_COLUMNS",
    "RESUMED_EVENT_COLUMNS",
    "RESUMED_PROGRESS_COLUMNS",
    "carried_keys",
    "delivered_twice",
    "foreign_session_events",
    "key_hash",
    "other_session_replays",
    "owned",
    "recurring_events",
    "recurring_hashes",
    "recurring_keys",
    "reissued",
    "replay_messages",
    "resumed_events",
    "resumed_flows",
    "resumed_progress",
    "same_origin",
]

INCARNATION: Final = (pl.col("status") == "resolved") & (
    pl.col("answer_stream_id") == pl.col("stream_id")
)
"""RESUMPTIONS rows of resumes that became an incarnation of their own stream."""

RECURRING_EVENT_COLUMNS: Final = ("session_id", "stream_id", "flow_id", "incarnation", "ts", "seq",
                                  "ordinal", "event_id", "event", "payload_hash")  # fmt: skip
"""The SSE_EVENTS columns of `recurring_events` (what the detectors reading it ask for)."""

RESUMED_EVENT_COLUMNS: Final = ("stream_id", "flow_id", "ts", "incarnation", "ordinal",
                                "stream_pos", "event_id", "id_only", "payload_hash", "event",
                                "data_hash")  # fmt: skip
"""The SSE_EVENTS columns of `resumed_events` (what the detectors reading it ask for; `event`
and `data_hash` say whether an answer told the client its stream is new)."""

REPLAY_MESSAGE_COLUMNS: Final = ("session_id", "stream_id", "flow_id", "ts", "seq", "incarnation",
                                 "ordinal", "event_id", "direction", "payload_hash",
                                 "data_hash", "progress_token", "progress")  # fmt: skip
"""The MESSAGES columns of `replay_messages` (what the detectors reading it ask for)."""

RESUMED_PROGRESS_COLUMNS: Final = ("stream_id", "incarnation", "stream_pos", "ts", "event_id",
                                   "data_hash", "progress_token", "progress")  # fmt: skip
"""The columns of `resumed_progress` (`data_hash`: where the notification's `total` is read)."""


def owned(*names: str) -> pl.Expr:
    """The text columns `names`, copied out of the pages they were read from: a few rows
    selected from a scan otherwise keep whole page buffers alive, in a cache or in the row group
    a Parquet sink holds.
    """
    return pl.col(*names) + ""


ISSUED: Final = pl.col("event_id").is_not_null() & (pl.col("event_id") != "") & ~pl.col("id_only")
"""SSE_EVENTS rows that issue an id (a priming event names one but carries nothing)."""


def key_hash(*key: str) -> pl.Expr:
    """`_key`: the 64-bit hash of a row's `key` values, as `recurring_hashes` lists them (a
    reader joins its rows to those on it)."""
    return pl.struct(*key).hash().alias("_key")


def recurring_hashes(rows: pl.LazyFrame, *key: str) -> pl.LazyFrame:
    """The 64-bit hashes (`_key`, `key_hash(*key)`) of the `key` values that more than one row
    of `rows` carries.

    Found by sorting the hashes on the streaming engine and keeping a hash equal to its
    predecessor (8 bytes a row; a count per key in a hash table holds several times that). A
    collision lets a few rows through whose key does not recur, never loses one: a reader
    compares the values themselves. Collect it before a plan that joins `rows` to it: a plan
    joining every row to a key set it is still computing holds the rows until the set is
    complete.
    """
    return (
        rows.select(key_hash(*key))
        .sort("_key")
        .filter(pl.col("_key") == pl.col("_key").shift())
        .unique()
    )


def delivered_twice(messages: pl.LazyFrame) -> pl.LazyFrame:
    """The server-to-client SSE messages one response carried more than once: a row per
    (session_id, stream_id, flow_id, event id, payload_hash) seen twice or more, with how many
    times (`_times`), its incarnation, kind, method and rpc id, and its first and last time.

    Twice-carried keys are rare: they are found by their hashes first (`recurring_hashes`),
    then only their rows are grouped on the key's values, which judge.
    """
    delivered = messages.filter(
        (pl.col("source") == "sse")
        & (pl.col("direction") == "s2c")
        & pl.col("event_id").is_not_null()
        & pl.col("payload_hash").is_not_null()
    )
    key = ("session_id", "stream_id", "flow_id", "event_id", "payload_hash")
    again = recurring_hashes(delivered, *key).collect(engine="streaming").lazy()
    return (
        delivered.with_columns(key_hash(*key))
        .join(again, on="_key", how="semi")
        .group_by(*key)
        .agg(
            pl.len().alias("_times"),
            pl.col("incarnation").first(),
            pl.col("kind").cast(pl.String).first().alias("_kind"),
            pl.col("method").first().alias("_method"),
            pl.col("rpc_id").first(),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .filter(pl.col("_times") >= 2)
        .rename({"event_id": "_event_id"})
    )


def recurring_keys(events: pl.LazyFrame) -> pl.LazyFrame:
    """`recurring_hashes` of (session, event id) over the events that issue an id (a null
    session is one session): what `recurring_events` selects by."""
    return recurring_hashes(events.filter(ISSUED), "session_id", "event_id")


def recurring_events(events: pl.LazyFrame, keys: pl.LazyFrame) -> pl.LazyFrame:
    """The SSE_EVENTS rows (columns `RECURRING_EVENT_COLUMNS`) carrying an event id that some
    other row of the same session carries too: the rows of `events` whose key is one of
    `recurring_keys(events)` (`keys`)."""
    return (
        events.filter(ISSUED)
        .select(*RECURRING_EVENT_COLUMNS, key_hash("session_id", "event_id"))
        .join(keys, on="_key", how="semi")
        .drop("_key")
        .with_columns(
            owned("session_id", "stream_id", "flow_id", "event_id", "event", "payload_hash")
        )
    )


def reissued(recurring: pl.LazyFrame, sessions: pl.LazyFrame) -> pl.LazyFrame:
    """The recurring events (`recurring_events`) whose id was issued with more than one payload
    (event type and `payload_hash`) where ids must be unique: the session, or without a server
    session (`anon:` and `client:` keys) the logical stream (`_scope`: "" or the stream id).
    Each with `_payloads`, how many payloads its id named."""
    scope = (
        pl.when(pl.col("kind").is_in(["mcp", "legacy"]))
        .then(pl.lit(""))
        .otherwise(pl.col("stream_id").fill_null(""))
        .alias("_scope")
    )
    kinds = sessions.select("session_id", "kind")
    scoped = recurring.join(kinds, on="session_id", how="left").with_columns(
        scope, pl.struct("event", "payload_hash").alias("_payload")
    )
    key = ("session_id", "_scope", "event_id")
    # Most recurring ids are replays of one payload: only the ids with several are kept.
    several = (
        scoped.group_by(key)
        .agg(pl.col("_payload").n_unique().alias("_payloads"))
        .filter(pl.col("_payloads") > 1)
    )
    return scoped.join(several, on=key, nulls_equal=True)


def resumed_events(events: pl.LazyFrame, resumptions: pl.LazyFrame) -> pl.LazyFrame:
    """The SSE_EVENTS rows (columns `RESUMED_EVENT_COLUMNS`) of every stream that a resume became
    an incarnation of: its first flow's events and every incarnation's.

    A cursor's flow is an incarnation of the stream it resolves to, so these hold every event a
    resume's cursor names as well as all that a replay judgement compares.
    """
    wanted = resumptions.filter(INCARNATION).select("stream_id")
    return (
        events.select(RESUMED_EVENT_COLUMNS)
        .join(wanted, on="stream_id", how="semi")
        .with_columns(
            owned("stream_id", "flow_id", "event_id", "payload_hash", "event", "data_hash")
        )
    )


def resumed_flows(placed: pl.LazyFrame, resumptions: pl.LazyFrame) -> pl.LazyFrame:
    """The `flow_id` of every flow of the streams `resumed_events` selects: the flows whose
    events it holds (`placed`: the flows' placement, `analyzer.timeline.exchanges.placement`)."""
    wanted = resumptions.filter(INCARNATION).select("stream_id")
    return placed.join(wanted, on="stream_id", how="semi").select("flow_id")


def carried_keys(*carriers: pl.LazyFrame) -> pl.LazyFrame:
    """The distinct `flow_id, ordinal` of the events of `carriers`: what names the messages
    they carried."""
    return pl.concat([c.select("flow_id", "ordinal") for c in carriers]).unique()


def replay_messages(messages: pl.LazyFrame, *carriers: pl.LazyFrame) -> pl.LazyFrame:
    """The MESSAGES rows (columns `REPLAY_MESSAGE_COLUMNS`) carried by the events of `carriers`
    (`recurring_events` and `resumed_events`, or their `carried_keys`: frames with `flow_id`
    and `ordinal`)."""
    return (
        messages.filter(pl.col("source") == "sse")
        .select(REPLAY_MESSAGE_COLUMNS)
        .join(carried_keys(*carriers), on=["flow_id", "ordinal"], how="semi")
        .with_columns(
            owned("session_id", "stream_id", "flow_id", "event_id", "payload_hash", "data_hash")
        )
    )


def resumed_progress(
    messages: pl.LazyFrame, resumptions: pl.LazyFrame, incarnations: pl.LazyFrame
) -> pl.LazyFrame:
    """The progress notifications (token and value read) on the streams a resume continued,
    each at its position in its stream, sorted by stream, token and position: a position orders
    the incarnations, then each one's events, so each token's values follow in the order the
    stream carried them (columns `RESUMED_PROGRESS_COLUMNS`).

    `messages`: MESSAGES rows holding those of the resumed streams' events (`replay_messages`).
    A position is the incarnation's `base_events` plus the event's ordinal, as for the event
    (computed, not joined from the events: a join would pass over every event).
    """
    wanted = resumptions.filter(INCARNATION).select("stream_id")
    return (
        messages.filter(pl.col("progress").is_not_null())
        .join(wanted, on="stream_id", how="semi")
        .drop_nulls(["ordinal", "progress_token"])
        .join(
            incarnations.select("stream_id", "incarnation", "base_events"),
            on=["stream_id", "incarnation"],
        )
        .with_columns((pl.col("base_events") + pl.col("ordinal")).alias("stream_pos"))
        .select(RESUMED_PROGRESS_COLUMNS)
        .sort("stream_id", "progress_token", "stream_pos", maintain_order=True)
    )


def same_origin(pairs: pl.LazyFrame, sessions: pl.LazyFrame) -> pl.LazyFrame:
    """The rows of `pairs` whose sessions `session_id` and `other` answered at one origin
    (SESSIONS `origin`: null for every session where the analysis reaches one). One event store
    serves one deployment: two servers that each number their events alike, or send the same
    notification, did not replay each other's."""
    origin = sessions.select("session_id", pl.col("origin").fill_null("").alias("_origin"))
    return (
        pairs.join(origin, on="session_id", how="left")
        .join(origin.rename({"session_id": "other", "_origin": "_other_origin"}), on="other",
              how="left")
        .filter(pl.col("_origin").eq_missing(pl.col("_other_origin")))
        .drop("_origin", "_other_origin")
    )  # fmt: skip


def foreign_session_events(
    rpc_messages: pl.LazyFrame, events: pl.LazyFrame, sessions: pl.LazyFrame
) -> pl.LazyFrame:
    """The events of a resume that answered one request twice (two responses under different
    event ids: the second is no replay of the first) that another session received too, same
    id and payload: one row per such event and other flow that carried it (columns
    `session_id, flow_id, ts, event_id, payload_hash, request_ids, other, other_flow`,
    `request_ids` the requests its resume answered twice), sessions of one origin only
    (`same_origin`). cross-session-replay's first rule,
    and what duplicate-response leaves to it. A session that issued an id alike on a first
    sending (an incarnation 0, priming events included) numbers its events as this one does,
    each on its own (per-stream counters in lockstep clients; a store the sessions share issues
    an id once): what it received says nothing of this session's.

    Such resumes are few or none: they are collected first, so that `events` (SSE_EVENTS, the
    largest frame) is read only when there is one.
    """
    twice = (
        rpc_messages.filter(ANSWER & (pl.col("incarnation") > 0) & pl.col("event_id").is_not_null())
        .group_by("session_id", "flow_id", "rpc_id")
        .agg(pl.col("event_id").n_unique().alias("sendings"))
        .filter(pl.col("sendings") > 1)
        .group_by("session_id", "flow_id")
        .agg(pl.col("rpc_id").sort().alias("request_ids"))
        .collect(engine="streaming")
    )
    key = ["event_id", "payload_hash"]
    issued = events.filter(ISSUED)
    if twice.is_empty():
        issued = issued.clear()
    carried = issued.join(twice.lazy(), on=["session_id", "flow_id"]).select(
        "session_id", "flow_id", "ts", *key, "request_ids"
    )
    elsewhere = issued.join(carried.select(key).unique(), on=key, how="semi").select(
        pl.col("session_id").alias("other"), pl.col("flow_id").alias("other_flow"), *key
    )
    first_sent = (
        (events if twice.height else events.clear())
        .filter((pl.col("incarnation") == 0) & (pl.col("event_id") != ""))
        .select("session_id", "event_id")
        .unique()
    )
    lockstep = (
        first_sent.join(twice.lazy().select("session_id").unique(), on="session_id", how="semi")
        .join(first_sent.rename({"session_id": "other"}), on="event_id")
        .select("session_id", "other")
        .unique()
    )
    return (
        carried.join(elsewhere, on=key)
        .filter(pl.col("other") != pl.col("session_id"))
        .join(lockstep, on=["session_id", "other"], how="anti")
        .pipe(same_origin, sessions)
    )


def other_session_replays(resumptions: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """Per resume flow whose cursor another session issued (RESUMPTIONS `other_session`), the
    ids (`replayed`, in the answer's order) of the messages that session's stream sent after
    the cursor and the answer carried again, same id and payload: the server resumed another
    session's stream into this one. `events`: SSE_EVENTS rows."""
    sent = events.filter(~pl.col("id_only") & pl.col("event_id").is_not_null())
    foreign = resumptions.filter(pl.col("status") == "other_session").collect()
    if foreign.is_empty():  # no cursor from another session (the usual case): no event is read
        sent = pl.LazyFrame(schema=sent.collect_schema())
    # Only the events of the streams those cursors name: the join below never holds the rest.
    cursor_streams = foreign.lazy().select(pl.col("cursor_stream_id").alias("stream_id")).unique()
    earlier = sent.join(cursor_streams, on="stream_id", how="semi").select(
        *(pl.col(c).alias(f"cursor_{c}") for c in ("session_id", "stream_id")),
        "event_id",
        "payload_hash",
        pl.col("ts").alias("_sent_ts"),
    )
    return (
        sent.select("flow_id", "ordinal", "event_id", "payload_hash")
        .join(foreign.lazy(), on="flow_id")
        .join(earlier, on=["cursor_session_id", "cursor_stream_id", "event_id", "payload_hash"])
        .filter(
            (pl.col("_sent_ts") >= pl.col("cursor_ts")) & (pl.col("event_id") != pl.col("cursor"))
        )
        .group_by("flow_id")
        .agg(pl.col("event_id").sort_by("ordinal").unique(maintain_order=True).alias("replayed"))
    )
