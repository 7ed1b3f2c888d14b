"""The dashboard's queries: the timeline and findings selected and reshaped for display.

Streamlit-free: each function takes the analyzer's `Timeline` (or an input's paths) and returns
collected frames or plain values, so it runs and is tested without a page; `dashboards.data`
caches them for the pages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import polars as pl

import analyzer.detectors as detectors
from analyzer.command import parse_ids
from analyzer.ingest import input_kind
from analyzer.ingest.jsonl import capture_files
from analyzer.timeline import Timeline

#: Name, size and mtime (ns) of every file an input is read from.
Signature = tuple[tuple[str, int, int], ...]
#: The inputs of one analysis, as given (several are merged, as by `seamwatch analyze`).
Source = tuple[str, ...]

#: Reader counts that stand for records lost before they reached the disk or the reader.
LOSS_KEYS: Final = ("seq_gap", "writer_dropped", "chunk_gap")

#: Characters of a payload shown in a chart tooltip or a table cell.
PREVIEW_CHARS: Final = 240

#: Rows of a "what happened between" table at most.
BETWEEN_ROWS: Final = 500


#: Payload texts by data hash, for these hashes.
Texts = Callable[[tuple[str, ...]], dict[str, str]]


def run_detectors(timeline: Timeline, options: Mapping[str, str]) -> pl.DataFrame:
    """The detectors chosen and tuned by the analysis options, as `seamwatch analyze` runs."""
    config = options.get("config")
    # The registry is read at call time, not bound at import, so tests can plant detectors.
    return detectors.run_detectors(
        timeline,
        only=parse_ids(options.get("only")),
        disable=parse_ids(options.get("disable")),
        config=detectors.load_config(Path(config)) if config else None,
        detectors=detectors.DETECTORS,
    )


def signature(source: Source) -> Signature:
    """Name, size and mtime of the inputs' files: the cache key of every loader.

    Raises `analyzer.ingest.IngestError` when an input holds nothing readable (yet).
    """
    out = []
    for path in source:
        p = Path(path)
        files = capture_files(p) if input_kind(p) == "capture" else [p]
        for f in files:
            try:
                stat = f.stat()
            except FileNotFoundError:  # renamed by a rotation between listing and stat
                continue
            # Several inputs may hold files of the same name: those are told apart by path.
            out.append((f.name if len(source) == 1 else str(f), stat.st_size, stat.st_mtime_ns))
    return tuple(out)


@dataclass(frozen=True)
class Overview:
    """Inputs, capture health and the size of the analysis."""

    inputs: pl.DataFrame  # path, kind, files, records, skipped, losses, cached, warnings
    records: int
    skipped: int
    losses: int
    unclean_stops: int
    warnings: tuple[str, ...]
    sessions: int
    streams: int
    incarnations: int
    resumptions: int
    tool_calls: int
    exchanges: int
    events: int
    first_ts: datetime | None
    last_ts: datetime | None


def overview_of(timeline: Timeline) -> Overview:
    """What was read and how much of it there is."""
    rows = [
        {
            "path": report.path,
            "kind": report.kind,
            "files": len(report.files),
            "records": report.records,
            "skipped": report.skipped,
            "losses": sum(int(report.counts.get(key, 0)) for key in LOSS_KEYS),
            "cached": report.cached,
            "warnings": "; ".join(report.warnings),
        }
        for report in timeline.inputs
    ]
    inputs = pl.DataFrame(
        rows,
        schema={
            "path": pl.String,
            "kind": pl.String,
            "files": pl.Int64,
            "records": pl.Int64,
            "skipped": pl.Int64,
            "losses": pl.Int64,
            "cached": pl.Boolean,
            "warnings": pl.String,
        },
    )
    counts = pl.collect_all(
        [
            frame.select(pl.len())
            for frame in (
                timeline.sessions,
                timeline.streams,
                timeline.incarnations,
                timeline.resumptions,
                timeline.tool_calls,
                timeline.exchanges,
                timeline.sse_events,
            )
        ]
        + [timeline.exchanges.select(pl.col("ts").min().alias("first"), _last_ts())]
    )
    sessions, streams, incarnations, resumptions, tool_calls, exchanges, events = (
        int(c.item()) for c in counts[:-1]
    )
    first_ts, last_ts = counts[-1].row(0)
    return Overview(
        inputs=inputs,
        records=int(inputs["records"].sum()),
        skipped=int(inputs["skipped"].sum()),
        losses=int(inputs["losses"].sum()),
        unclean_stops=sum(int(r.counts.get("missing_close", 0)) for r in timeline.inputs),
        warnings=tuple(w for r in timeline.inputs for w in r.warnings),
        sessions=sessions,
        streams=streams,
        incarnations=incarnations,
        resumptions=resumptions,
        tool_calls=tool_calls,
        exchanges=exchanges,
        events=events,
        first_ts=first_ts,
        last_ts=last_ts,
    )


def _last_ts() -> pl.Expr:
    return pl.max_horizontal(
        pl.col("ts").max(), pl.col("response_ts").max(), pl.col("end_ts").max()
    ).alias("last")


def sessions_of(timeline: Timeline) -> pl.DataFrame:
    """The sessions (analyzer.schema.SESSIONS), earliest first."""
    return timeline.sessions.sort("start", "session_id", nulls_last=True).collect()


def recent_of(timeline: Timeline, limit: int) -> pl.DataFrame:
    """The latest HTTP exchanges, newest first (the Live page)."""
    return (
        timeline.exchanges.sort("ts", "seq", descending=True)
        .head(limit)
        .select(
            "ts",
            "session_id",
            "method",
            "path",
            "rpc_method",
            "rpc_id",
            "status",
            "replica",
            "last_event_id",
            "events",
            "end_how",
            "stream_id",
            "incarnation",
            "flow_id",
        )
        .collect()
    )


@dataclass(frozen=True)
class SessionView:
    """One session's frames, as the timeline page draws them."""

    session: dict[str, Any]
    streams: pl.DataFrame  # STREAMS, earliest first
    incarnations: pl.DataFrame  # INCARNATIONS
    exchanges: pl.DataFrame  # EXCHANGES
    events: pl.DataFrame  # SSE_EVENTS + kind, method, rpc_id of the message each carries
    messages: pl.DataFrame  # MESSAGES not carried by SSE (request and response bodies)
    resumptions: pl.DataFrame  # RESUMPTIONS
    tool_calls: pl.DataFrame  # TOOL_CALLS
    previews: dict[str, str]  # data hash -> first PREVIEW_CHARS characters


def session_view_of(timeline: Timeline, session_id: str, texts: Texts) -> SessionView:
    """Every frame of one session, collected; `texts` gives payload texts by data hash."""
    own = pl.col("session_id") == session_id
    carried = (
        timeline.messages.filter(own & (pl.col("source") == "sse"))
        .sort("member", nulls_last=False)
        .unique(["flow_id", "ordinal"], keep="first", maintain_order=True)
        .select(
            "flow_id",
            "ordinal",
            pl.col("kind").cast(pl.String).alias("rpc_kind"),
            pl.col("method").alias("rpc_method"),
            "rpc_id",
        )
    )
    frames = pl.collect_all(
        [
            timeline.sessions.filter(own),
            timeline.streams.filter(own).sort("ts", "seq"),
            timeline.incarnations.filter(own).sort("ts", "seq"),
            timeline.exchanges.filter(own).sort("ts", "seq"),
            timeline.sse_events.filter(own)
            .join(carried, on=["flow_id", "ordinal"], how="left")
            .sort("ts", "seq", "ordinal"),
            timeline.messages.filter(own & (pl.col("source") != "sse")).sort("ts", "seq"),
            timeline.resumptions.filter(own).sort("ts", "seq"),
            timeline.tool_calls.filter(own).sort("ts", "seq"),
        ]
    )
    session, streams, incarnations, exchanges, events, messages, resumptions, calls = frames
    hashes = pl.concat(
        [
            events["data_hash"],
            messages["data_hash"],
        ]
    ).drop_nulls()
    previews = {
        key: _preview(text) for key, text in texts(tuple(sorted(set(hashes.to_list())))).items()
    }
    return SessionView(
        session=session.row(0, named=True) if session.height else {"session_id": session_id},
        streams=streams,
        incarnations=incarnations,
        exchanges=exchanges,
        events=events,
        messages=messages,
        resumptions=resumptions,
        tool_calls=calls,
        previews=previews,
    )


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@dataclass(frozen=True)
class Evidence:
    """What a finding's evidence ids name in the timeline."""

    finding: dict[str, Any]
    events: pl.DataFrame  # every occurrence of the named event ids in the session
    calls: pl.DataFrame  # tool calls with the named request ids
    exchanges: pl.DataFrame  # the named flows, and the flows of the named streams
    incarnations: pl.DataFrame  # incarnations of the named streams
    resumptions: pl.DataFrame  # resumes of the named streams or with a named cursor
    between: pl.DataFrame  # the session's wire activity from first_ts to last_ts
    texts: dict[str, str]  # data hash -> payload text, for events, calls and results


def evidence_of(timeline: Timeline, finding: dict[str, Any], texts: Texts) -> Evidence:
    """The timeline rows a finding's evidence names; `texts` gives payload texts by data hash."""
    session = finding["session"]
    own = pl.col("session_id") == session if session is not None else pl.lit(True)
    flows = list(finding["flow_ids"])
    streams = list(finding["stream_ids"])
    event_ids = list(finding["event_ids"])
    request_ids = list(finding["request_ids"])
    frames = pl.collect_all(
        [
            timeline.sse_events.filter(own & pl.col("event_id").is_in(event_ids))
            .join(
                timeline.exchanges.select("flow_id", "replica", "method"), on="flow_id", how="left"
            )
            .sort("ts", "seq"),
            timeline.tool_calls.filter(own & pl.col("request_id").is_in(request_ids))
            .join(
                timeline.exchanges.select("flow_id", "replica", "request_body_hash"),
                on="flow_id",
                how="left",
            )
            .join(
                timeline.messages.filter(pl.col("direction") == "s2c")
                .select("flow_id", pl.col("rpc_id").alias("request_id"), "data_hash")
                .unique(["flow_id", "request_id"], keep="first"),
                left_on=["result_flow_id", "request_id"],
                right_on=["flow_id", "request_id"],
                how="left",
            )
            .rename({"data_hash": "result_data_hash"})
            .sort("ts", "seq"),
            timeline.exchanges.filter(
                pl.col("flow_id").is_in(flows) | pl.col("stream_id").is_in(streams)
            ).sort("ts", "seq"),
            timeline.incarnations.filter(own & pl.col("stream_id").is_in(streams)).sort(
                "stream_id", "incarnation"
            ),
            timeline.resumptions.filter(
                own & (pl.col("stream_id").is_in(streams) | pl.col("cursor").is_in(event_ids))
            ).sort("ts", "seq"),
        ]
    )
    events, calls, exchanges, incarnations, resumptions = frames
    between = _between(timeline, session, finding["first_ts"], finding["last_ts"])
    hashes = pl.concat(
        [events["data_hash"], calls["request_body_hash"], calls["result_data_hash"]]
    ).drop_nulls()
    return Evidence(
        finding=finding,
        events=events,
        calls=calls,
        exchanges=exchanges,
        incarnations=incarnations,
        resumptions=resumptions,
        between=between,
        texts=texts(tuple(sorted(set(hashes.to_list())))),
    )


def _between(
    timeline: Timeline, session: str | None, first: datetime | None, last: datetime | None
) -> pl.DataFrame:
    """Requests, messages and stream ends of the session from `first` to `last`, in time order."""
    schema = pl.Schema(
        {
            "ts": pl.Datetime("ns", "UTC"),
            "what": pl.String(),
            "flow_id": pl.String(),
            "stream_id": pl.String(),
            "incarnation": pl.Int32(),
            "replica": pl.String(),
            "event_id": pl.String(),
            "rpc_id": pl.String(),
            "detail": pl.String(),
        }
    )
    if session is None or first is None or last is None:
        return pl.DataFrame(schema=schema)
    own = pl.col("session_id") == session
    replicas = timeline.exchanges.select("flow_id", "replica")
    requests = timeline.exchanges.filter(own & pl.col("ts").is_between(first, last)).select(
        "ts",
        pl.concat_str(pl.lit("request "), "method", pl.lit(" → "), pl.col("status").cast(pl.String))
        .fill_null(pl.concat_str(pl.lit("request "), "method"))
        .alias("what"),
        "flow_id",
        "stream_id",
        "incarnation",
        "replica",
        pl.lit(None, pl.String).alias("event_id"),
        "rpc_id",
        pl.concat_str(
            pl.col("rpc_method").fill_null(""),
            pl.when(pl.col("last_event_id").is_not_null())
            .then(pl.concat_str(pl.lit(" Last-Event-ID: "), "last_event_id"))
            .otherwise(pl.lit("")),
        ).alias("detail"),
    )
    ends = timeline.exchanges.filter(
        own & pl.col("end_ts").is_between(first, last) & pl.col("sse").fill_null(False)
    ).select(
        pl.col("end_ts").alias("ts"),
        pl.concat_str(pl.lit("stream end: "), pl.col("end_how").cast(pl.String))
        .fill_null("stream end")
        .alias("what"),
        "flow_id",
        "stream_id",
        "incarnation",
        "replica",
        pl.lit(None, pl.String).alias("event_id"),
        pl.lit(None, pl.String).alias("rpc_id"),
        pl.col("end_error").alias("detail"),
    )
    delivered = (
        timeline.messages.filter(
            own & pl.col("ts").is_between(first, last) & (pl.col("direction") == "s2c")
        )
        .join(replicas, on="flow_id", how="left")
        .select(
            "ts",
            pl.concat_str(pl.lit("delivered "), pl.col("kind").cast(pl.String)).alias("what"),
            "flow_id",
            "stream_id",
            "incarnation",
            "replica",
            "event_id",
            "rpc_id",
            pl.col("method").alias("detail"),
        )
    )
    return (
        pl.concat([requests, ends, delivered], how="vertical_relaxed")
        .sort("ts")
        .head(BETWEEN_ROWS)
        .collect()
        .cast(schema)
    )
