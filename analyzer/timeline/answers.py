"""Which request each answer answers: the `answers` column of `Timeline.rpc_messages`.

A response or error names its request by id, and ids recur under one session key: a client may
reuse one, short-lived clients each count theirs from 1 under one 2026 client key, and the key of
a 2025 server without sessions (client address, latest `initialize`) holds every client of a
host, or behind one gateway. An answer (a server's response or error to a request id) answers:

- the request that opened its carrier (its stream, else its exchange) when that request has its
  id: a server answers on the request's own stream, or on a resume of it;
- in 2026-07-28 traffic nothing else: a response belongs to the exchange that carried it;
- else the latest earlier request of its session with its id: the 2024-11-05 transport answers
  every request on its GET stream, and a stray answer lands on a GET or another request's stream;
- else none: no captured request has its id (null).

`answers` holds that request's carrier (`coalesce(stream_id, flow_id)`), the key readers match
requests on. With ids unique in a session this is the id match it replaces; joining every request
to every answer with its id instead cost their product where ids recur, and paired each answer
with requests it did not answer (a duplicate response, a lost one hidden, a replay of another
stream's response, none of them real).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from analyzer.timeline.keys import SESSIONLESS
from analyzer.timeline.order import latest_before

__all__ = ["ANSWER", "CANCELLATION", "CARRIER", "REQUEST", "answered_requests"]

ANSWER: Final = (
    (pl.col("direction") == "s2c")
    & pl.col("kind").is_in(["response", "error"])
    & pl.col("rpc_id").is_not_null()
    # An error with a null id (a transport-level refusal) answers no request.
    & (pl.col("rpc_id") != "null")
)
"""The message rows that answer a request."""

REQUEST: Final = (pl.col("direction") == "c2s") & (pl.col("kind") == "request")
"""The message rows of the client's requests (the rows `answered` is set on)."""

CANCELLATION: Final = (pl.col("direction") == "c2s") & (
    pl.col("method") == "notifications/cancelled"
)
"""The message rows in which the client calls a request off (`cancel_id` names it): no answer
is owed to it any more (see lost-response for the one exception)."""

CARRIER: Final = pl.coalesce("stream_id", "flow_id")
"""What carried a message: its logical stream, else its exchange."""


def _hashed(carrier: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Two 64-bit hashes of (session, id, carrier): `_h1`, `_h2`."""
    key = pl.struct("session_id", "rpc_id", carrier.alias("carrier"))
    return key.hash(1).alias("_h1"), key.hash(2).alias("_h2")


def answered_requests(rpc: pl.LazyFrame, *, keyed: pl.LazyFrame) -> pl.LazyFrame:
    """`rpc` (request, response and cancellation message rows) with `answers` and `answered`
    added, row for row: the carrier of the request each answer answers (null for other rows),
    and for each request whether an answer to it came at or after it (null for other rows)."""
    rows = rpc.with_row_index("_msg").cache()  # read again and again below: numbered once
    known = pl.col("session_id").is_not_null() & pl.col("rpc_id").is_not_null()
    # (session, id, carrier) matched as two 64-bit hashes of it: a join on the three strings
    # was the timeline's peak memory. Distinct keys collide in both at odds of 2**-128, less
    # than two random UUIDs do.
    hashed = _hashed(CARRIER)
    requests = rows.filter(REQUEST & known)
    opened = requests.select(*hashed, pl.lit(True).alias("_own")).unique()
    matched = (
        rows.filter(ANSWER & known)
        .select("_msg", *hashed)
        .join(opened, on=["_h1", "_h2"], how="left")
        .select("_msg", "_own")
    )
    own = rows.join(matched.filter(pl.col("_own")), on="_msg", how="semi")
    # Not on the stream of a request with its id: in 2026 traffic none, else the latest before.
    strays = (
        rows.join(matched.filter(pl.col("_own").is_null()), on="_msg", how="semi")
        .select("_msg", "session_id", "rpc_id", "flow_id", "ts", "seq")
        .join(keyed.select("flow_id", "era"), on="flow_id", how="left")
        .filter(~SESSIONLESS.fill_null(False))
        .drop("flow_id", "era")
    )
    owners = pl.concat(
        [
            own.select("_msg", CARRIER.alias("answers")),
            latest_before(
                strays,
                requests.select(
                    "session_id",
                    "rpc_id",
                    CARRIER.alias("answers"),
                    pl.col("ts").alias("_req_ts"),
                    pl.col("seq").alias("_req_seq"),
                ),
                by=["session_id", "rpc_id"],
                on=("ts", "seq"),
                candidate_on=("_req_ts", "_req_seq"),
            ).select("_msg", "answers"),
        ]
    )
    # The new columns beside the rows as they are: joining them to them would copy every column.
    answered = rows.select("_msg").join(owners, on="_msg", how="left", maintain_order="left")
    with_answers = pl.concat(
        [rows.drop("_msg"), answered.select("answers")], how="horizontal"
    ).cache()  # read by `replied` and `flags` below: computed once
    # A request is answered when an answer to it (its session, id and carrier) came at or after
    # it: the latest answer's time says it. Matched on the two hashes again (see above).
    replied = (
        with_answers.filter(pl.col("answers").is_not_null())
        .select(*_hashed(pl.col("answers")), "ts")
        .group_by("_h1", "_h2")
        .agg(pl.col("ts").max().alias("_last"))
    )
    flags = (
        with_answers.select(*hashed, REQUEST.alias("_request"), "ts")
        .join(replied, on=["_h1", "_h2"], how="left", maintain_order="left")
        .select(
            pl.when("_request")
            .then((pl.col("_last") >= pl.col("ts")).fill_null(False))
            .alias("answered")
        )
    )
    return pl.concat([with_answers, flags], how="horizontal")
