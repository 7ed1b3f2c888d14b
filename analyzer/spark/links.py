"""The rows that relate sessions for the cross-session detectors (`CROSS_SESSION`).

Each session offers keys (the event ids it issued, its id-counter prefixes, its place among its
client's sessions) and wants some (a cursor it did not issue, the ids and prefixes of what its
resumes carried, its tool calls' keys and listings). The driver joins them in Spark: a key is
live when some session wants it (`wants`, and its `via` condition holds) and two or more
sessions hold it; the sessions of live keys are judged together, the others alone, with the
same result as when every session is judged at once. `via`: a want that matters only when a
tool-call key repeats (`CALLS_VIA`, then the key), or (`LISTED_VIA`, then `CALLS_VIA` and the
key) when it repeats and the tool's listings do not all carry the same hints. A listing's offer
carries its hints in `via`.

Tool listings: a call's hints are those of the latest listing of its server and tool at or
before it, else of the latest anywhere (`analyzer.timeline.tool_calls`). When every listing of a
tool carries the same hints, any listing of the call's server and tool gives the call those
hints; a call whose own session lists the tool on the call's endpoint (a session has one
origin, so the same authority and path is the same server) needs no other session's listing.
Only the other calls relate the sessions that listed the tool (every session, when clients
list the tools at each start).

The client's next session (`repeated-tool-call` repeats a call in it, not in a later one): each
session offers `ORDER` and its client with its start in `ts`. The driver relates a session
whose call key recurs in another session to the sessions of its client that start with it or
next: with those, the sessions judged together rank the same way apart as in the capture (a
session between two calls' sessions is there, so they are not taken for next ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detectors import DETECTORS, DetectorConfig
from analyzer.timeline.counters import id_counter

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = ["CALLS_VIA", "LINK_COLUMNS", "LISTED_VIA", "ORDER", "REPEATED", "link_rows", "window_of"]

LINK_COLUMNS: Final = ("key", "session_id", "wants", "via", "ts")
ORDER: Final = "order:"
CALLS_VIA: Final = "calls:"
LISTED_VIA: Final = "listed:"
#: The detector whose window narrows the tool-call keys (`analyzer.spark.engine`).
REPEATED: Final = "repeated-tool-call"
_HINTS: Final = ("annotated", "read_only_hint", "destructive_hint", "idempotent_hint",
                 "open_world_hint")  # fmt: skip


def window_of(detectors: Sequence[str], config: DetectorConfig | None) -> float | None:
    """`repeated-tool-call`'s `window_s` in this run (configured, else its default); None when
    it does not run."""
    if REPEATED not in detectors:
        return None
    (detector,) = (d for d in DETECTORS if d.id == REPEATED)
    window = (config or {}).get(REPEATED, {}).get("window_s", detector.thresholds["window_s"])
    assert isinstance(window, int | float)
    return float(window)


def _rows(
    frame: pl.LazyFrame,
    key: pl.Expr,
    *,
    wants: bool,
    via: pl.Expr | None = None,
    ts: pl.Expr | None = None,
) -> pl.LazyFrame:
    return frame.select(
        key.alias("key"),
        "session_id",
        pl.lit(wants).alias("wants"),
        (via if via is not None else pl.lit(None, pl.String)).alias("via"),
        (ts if ts is not None else pl.lit(None, pl.Int64)).alias("ts"),
    )


def link_rows(timeline: Timeline, tools: pl.LazyFrame) -> pl.LazyFrame:
    """`LINK_COLUMNS` rows of a timeline's sessions (`tools`: its RAW_TOOLS rows, the listings).
    Distinct but for the tool-call keys, one row a call."""
    events = timeline.sse_events.select("session_id", "stream_id", "flow_id", "event_id").filter(
        pl.col("event_id").is_not_null() & (pl.col("event_id") != "")
    )
    resumes = timeline.exchanges.filter(pl.col("last_event_id").is_not_null())
    issued = events.select("session_id", "event_id").unique()
    # A cursor its session never issued resolves in another session (DESIGN.md §2).
    foreign = (
        resumes.select("session_id", pl.col("last_event_id").alias("event_id"))
        .join(issued, on=["session_id", "event_id"], how="anti")
        .unique()
    )
    resumed = events.join(resumes.select("flow_id"), on="flow_id", how="semi")
    on_resumed = events.join(
        resumes.select("stream_id").drop_nulls().unique(), on="stream_id", how="semi"
    )
    prefix = id_counter("event_id", "prefix", "n")[0]
    listings = _listings(timeline, tools)
    calls = _calls(timeline, listings)
    key = pl.concat_str(pl.lit("id:"), "event_id")
    call_ts = pl.col("ts").dt.epoch("ns")
    parts = [
        _rows(issued, key, wants=False),
        _rows(foreign, key, wants=True),
        _rows(resumed, key, wants=True),
        _rows(
            events.select("session_id", prefix).drop_nulls("prefix").unique(),
            pl.concat_str(pl.lit("prefix:"), "prefix"),
            wants=False,
        ),
        _rows(
            on_resumed.select("session_id", prefix).drop_nulls("prefix").unique(),
            pl.concat_str(pl.lit("prefix:"), "prefix"),
            wants=True,
        ),
        # Every call (not distinct: the driver counts them), at its time (the driver chains a
        # key's calls by `window_s`), and what a repeat of it reads.
        _rows(calls, pl.col("call"), wants=True, ts=call_ts),
        _rows(
            _clients(timeline),
            pl.concat_str(pl.lit(ORDER), "client"),
            wants=False,
            ts=pl.col("start").dt.epoch("ns"),
        ),
        _rows(
            calls,
            pl.concat_str(pl.lit("list:"), "tool_name"),
            wants=True,
            via=pl.concat_str(
                pl.when(pl.col("self_listed")).then(pl.lit(LISTED_VIA)).otherwise(pl.lit("")),
                pl.lit(CALLS_VIA),
                "call",
            ),
            ts=call_ts,
        ),
        _rows(listings, pl.col("listing"), wants=False, via=pl.col("hints")),
    ]
    calls_rows = pl.col("key").str.starts_with("call:")
    merged = pl.concat(parts, how="vertical")
    return pl.concat(
        [merged.filter(calls_rows), merged.filter(~calls_rows).unique()], how="vertical"
    ).select(LINK_COLUMNS)


def _clients(timeline: Timeline) -> pl.LazyFrame:
    """`session_id, client, start` as `repeated-tool-call` names a session's client (its next
    session is the next at the same origin) and ranks its sessions."""
    client = pl.coalesce(
        pl.concat_str("client_ip", "client_info", pl.col("origin").fill_null(""), separator="|"),
        "session_id",
    )
    return timeline.sessions.select("session_id", client.alias("client"), "start")


def _calls(timeline: Timeline, listings: pl.LazyFrame) -> pl.LazyFrame:
    """Every tool call with its client, `call` key (what `repeated-tool-call` matches on) and
    whether its own session lists the tool on the call's endpoint (`self_listed`)."""
    endpoints = timeline.exchanges.select("flow_id", "authority", "path")
    own = (
        listings.select("session_id", "tool_name", "authority", "path")
        .unique()
        .with_columns(pl.lit(True).alias("self_listed"))
    )
    return (
        timeline.tool_calls.join(_clients(timeline), on="session_id", how="left")
        .join(endpoints, on="flow_id", how="left")
        .join(own, on=["session_id", "tool_name", "authority", "path"], how="left")
    ).select(
        "session_id",
        "client",
        "tool_name",
        "ts",
        pl.col("self_listed").fill_null(False),
        pl.concat_str(
            pl.lit("call:"),
            *(
                pl.col(c).fill_null("\x00")
                for c in ("client", "server", "tool_name", "arguments_hash")
            ),
            separator="|",
        ).alias("call"),
    )


def _listings(timeline: Timeline, tools: pl.LazyFrame) -> pl.LazyFrame:
    """`session_id, listing, tool_name, authority, path, hints`: the tools a session's
    `tools/list` results named, on which exchange, with what hints. The key is the name alone:
    which server a listing speaks for is the timeline's to judge (a legacy server lists on its
    GET stream, so its listing's exchange is not the calls' endpoint and relates as before),
    and a coarser key only relates more sessions."""
    hints = pl.concat_str(
        *(pl.col(c).cast(pl.String).fill_null("-") for c in _HINTS), separator=","
    )
    return (
        tools.join(
            timeline.exchanges.select("flow_id", "session_id", "authority", "path"), on="flow_id"
        )
        .select(
            "session_id",
            pl.concat_str(pl.lit("list:"), "tool_name").alias("listing"),
            "tool_name",
            "authority",
            "path",
            hints.alias("hints"),
        )
        .unique()
    )
