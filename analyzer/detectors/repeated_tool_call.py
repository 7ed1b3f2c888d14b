"""The same side-effecting tools/call, same canonical arguments, sent again within `window_s`.

Flags a `tools/call` repeating one of the same client (in its session or its next one at the
same origin: same client ip and clientInfo) to the same server: same tool, same RFC 8785
canonical `arguments`, same or new id. High when the first call's exchange broke, got a 404, no
HTTP response or a 202, and no result had arrived before the repeat (a retry after loss: it may
have run twice, whether or not a `tools/list` names the tool); once the first result was
delivered, medium for a tool a captured `tools/list` names as side-effecting (a double submit)
and low for a tool none names (hints unknown: a deliberate re-run looks the same). A tool listed
without annotations is side-effecting. Must not flag read-only tools (`readOnlyHint`) or MRTR
legs (`inputResponses` / `requestState`, or a predecessor that returned InputRequiredResult);
idempotent tools (`idempotentHint`) are low, and their repeats are one finding per session, tool
and arguments (a client polling an idempotent tool would otherwise get one per call).
What to change: an idempotency key the server deduplicates on; resume a broken stream
(Last-Event-ID) or ask what ran instead of re-issuing; a repeat nothing lost: why the client
sent it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

#: Columns of the earlier call each repeat carries as `prev_<column>`.
_PREV: Final = ("session_id", "flow_id", "stream_id", "request_id", "ts", "replica", "rank",
                "first_outcome", "result_delivered", "result_ts", "input_required")  # fmt: skip
_DETAIL: Final = (
    "tools/call {} (request {}, flow {}, replica {}) was sent again with the same canonical "
    "arguments as request {} (flow {}, replica {}) {} s later, {}. The first exchange ended "
    "'{}'{}. {} What to change: give the tool an idempotency key the server deduplicates on; {}"
)
_AFTER_LOSS: Final = (
    "after a broken stream, resume it with Last-Event-ID where the era allows (not 2026-07-28) "
    "or ask the server what ran, instead of re-issuing the call."
)
_NOTHING_LOST: Final = (
    "nothing was lost before this repeat, so look at why the client sent the same call again "
    "(a retry on a timeout, a double submit, a loop)."
)
_RUN_DETAIL: Final = (
    "tools/call {} was sent {} times with the same canonical arguments (requests {}) over {} s. "
    "The tool is listed as idempotent: a repeat should be harmless. What to change: nothing if "
    "the repeats were meant; else look at why the client sends the same call again."
)


def _pick(*branches: tuple[pl.Expr, str], otherwise: str | pl.Expr) -> pl.Expr:
    """The text of the first branch whose condition holds, else `otherwise`."""
    last = otherwise if isinstance(otherwise, pl.Expr) else pl.lit(otherwise)
    return pl.coalesce(*(pl.when(cond).then(pl.lit(text)) for cond, text in branches), last)


def detect(timeline: Timeline, *, window_s: float = 120.0) -> pl.LazyFrame:
    """One finding per repeated call, citing it and the call it repeats."""
    # The client's next session is its next one at the same origin: a call to another server
    # is no repeat (the server is in the key too).
    client = pl.coalesce(
        pl.concat_str("client_ip", "client_info", pl.col("origin").fill_null(""), separator="|"),
        "session_id",
    )
    sessions = timeline.sessions.select("session_id", client.alias("client"), "start")
    rank = pl.col("start").rank("ordinal").over("client").alias("rank")
    key = ("client", "server", "tool_name", "arguments_hash")
    same_key = pl.all_horizontal(*(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in key))
    calls = (
        timeline.tool_calls.filter(~pl.col("read_only_hint").fill_null(False))
        .join(sessions.with_columns(rank), on="session_id", how="left")
        # Only a key sent twice can repeat (few calls are): the rest skip the replica lookup
        # and the sort.
        .filter(pl.len().over(key) > 1)
        .join(timeline.exchanges.select("flow_id", "replica"), on="flow_id", how="left")
        # Each call next to the one before it with the same key: sorted once, each previous
        # value a shift (cheaper than a window per column over the key).
        .sort(*key, "ts", "seq", maintain_order=True)
        .with_columns(pl.when(same_key).then(pl.col(c).shift(1)).alias(f"prev_{c}") for c in _PREV)
    )
    p = {c: pl.col(f"prev_{c}") for c in _PREV}
    # "accepted": a 202 whose result was due on another stream (legacy SSE, a GET stream).
    lost = p["first_outcome"].is_in(("broken", "404", "no_response", "accepted")) & ~(
        p["result_delivered"] & (p["result_ts"] <= pl.col("ts"))
    ).fill_null(False)
    listed, idempotent = pl.col("tool_listed"), pl.col("idempotent_hint").fill_null(False)
    gap_s = (pl.col("ts") - p["ts"]).dt.total_milliseconds() / 1000
    detail = pl.format(
        _DETAIL,
        "tool_name",
        p["request_id"],
        p["flow_id"],
        p["replica"].fill_null("unknown"),
        "request_id",
        "flow_id",
        pl.col("replica").fill_null("unknown"),
        gap_s.round(1).cast(pl.String),
        _pick(
            (p["session_id"] == pl.col("session_id"), "in the same session"),
            otherwise=pl.format("in the client's next session (first in {})", p["session_id"]),
        ),
        p["first_outcome"],
        _pick(
            (lost, " before its result reached the client: the tool may have run twice"),
            otherwise=": the client asked for a second execution",
        ),
        _pick(
            (~listed, "No captured tools/list names the tool, so its hints are unknown."),
            otherwise="The tool is listed as side-effecting (not read-only, not idempotent).",
        ),
        _pick((lost, _AFTER_LOSS), otherwise=_NOTHING_LOST),
    )
    found = calls.filter(
        pl.col("tool_name").is_not_null()
        & (gap_s <= window_s)
        & (pl.col("rank") - p["rank"] <= 1)
        & ~pl.col("mrtr").fill_null(False)
        & ~p["input_required"].fill_null(False)
    )

    def repeats(of: pl.LazyFrame) -> pl.LazyFrame:
        return emit(
            of,
            severity=_pick(
                (idempotent, "low"), (lost, "high"), (~listed, "low"), otherwise="medium"
            ),
            title=pl.format(
                "tools/call {} {}",
                "tool_name",
                _pick(
                    (lost, "re-issued after its first call was lost: it may have run twice"),
                    otherwise="repeated with the same arguments",
                ),
            ),
            detail=detail,
            flow_ids=pl.concat_list(p["flow_id"], "flow_id"),
            stream_ids=pl.concat_list(p["stream_id"], "stream_id"),
            request_ids=pl.concat_list(p["request_id"], "request_id"),
            first_ts=p["ts"],
            last_ts="ts",
            extra=pl.concat_list("tool_name", "arguments_hash"),
        )

    # Idempotent repeats gather into one finding a run; an unlisted tool's low ones stay apart.
    evidence = ("flow_ids", "stream_ids", "request_ids")
    calls_in_run = pl.col("flow_ids").list.len()  # one HTTP exchange a call (ids may repeat)
    runs = (
        repeats(found.filter(idempotent))
        .sort("last_ts", "first_ts")  # each run's calls in the order they were sent
        .group_by("session", "fingerprint_extra", maintain_order=True)
        .agg(
            pl.col("era", "severity").first(),
            *(
                pl.col(c)
                .list.explode(keep_nulls=False, empty_as_null=False)
                .unique(maintain_order=True)
                for c in evidence
            ),
            pl.col("first_ts").min(),
            pl.col("last_ts").max(),
        )
        .with_columns(
            pl.format(
                "tools/call {} repeated with the same arguments ({} calls, idempotent)",
                pl.col("fingerprint_extra").list.first(),
                calls_in_run,
            ).alias("title"),
            pl.format(
                _RUN_DETAIL,
                pl.col("fingerprint_extra").list.first(),
                calls_in_run,
                pl.col("request_ids").list.join(", "),
                ((pl.col("last_ts") - pl.col("first_ts")).dt.total_milliseconds() / 1000)
                .round(1)
                .cast(pl.String),
            ).alias("detail"),
        )
    )
    return pl.concat([repeats(found.filter(~idempotent)), runs], how="diagonal")


DETECTOR: Final[Detector] = Detector(
    id="repeated-tool-call", severity=Severity.MEDIUM, description=__doc__ or "", detect=detect
)
