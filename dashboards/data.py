"""The dashboard's loaders: the analyzer's frames for one input, cached and bounded.

Every loader takes the inputs (`Source`: one path or several, merged into one analysis as by
`seamwatch analyze`) and their `signature` (name, size and mtime of each file read),
so a capture that grows (a running proxy's `.partial` file) gets new entries and an unchanged
one is never read twice; the analyzer's Parquet cache, keyed the same way, makes even a new
entry cheap when another process already parsed that state. The Live page instead follows a
capture with one `analyzer.ingest.tail.CaptureTail` per path, which reads only the bytes
appended since the previous refresh (`live_state` and the `live_*` loaders). Each cache has a bound
(`max_entries`). Loaders return plain Polars frames and small dataclasses; the analysis is the
analyzer's (`load_timeline`, `run_detectors`): here it is only selected and reshaped for display.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import polars as pl
import streamlit as st

import analyzer.detectors as detectors
from analyzer.cache import read_through
from analyzer.ingest import input_kind
from analyzer.ingest.jsonl import capture_files
from analyzer.ingest.tail import CaptureTail
from analyzer.report.run import parse_ids
from analyzer.timeline import Timeline, load_timeline
from dashboards.launch import OPTIONS_ENV, SOURCE_ENV, decode_options, decode_source

__all__ = [
    "LOSS_KEYS",
    "PREVIEW_CHARS",
    "Evidence",
    "LiveState",
    "Overview",
    "SessionView",
    "Signature",
    "Source",
    "evidence",
    "findings",
    "live_findings",
    "live_overview",
    "live_recent_exchanges",
    "live_state",
    "overview",
    "payload_texts",
    "recent_exchanges",
    "session_view",
    "sessions",
    "signature",
    "source",
]

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


def source() -> Source | None:
    """The inputs the dashboard was started on (`seamwatch dashboard PATH...`), if any."""
    return decode_source(os.environ.get(SOURCE_ENV, ""))


def analysis_options() -> dict[str, str]:
    """The analysis options the dashboard was started with (`seamwatch dashboard --only ...`)."""
    return decode_options(os.environ.get(OPTIONS_ENV, ""))


def _run_detectors(timeline: Timeline) -> pl.DataFrame:
    """The detectors chosen and tuned by the analysis options, as `seamwatch analyze` runs."""
    options = analysis_options()
    config = options.get("config")
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


@st.cache_resource(max_entries=2, show_spinner="Reading the capture…")
def _timeline(source: Source, sig: Signature) -> Timeline:
    """The analyzer's timeline of this state of the input (lazy scans of its Parquet cache)."""
    del sig  # the cache key only: load_timeline re-checks sizes and mtimes itself
    # Through the cache as `seamwatch analyze` reads it: a damaged entry is parsed again.
    options = analysis_options()
    return read_through(
        lambda cache: load_timeline(
            list(source),
            replica_header=options.get("replica_header"),
            client_header=options.get("client_header"),
            cache=cache,
        ),
        use_cache=options.get("no_cache") != "true",
    )


def check_readable(source: Source, sig: Signature) -> None:
    """Read the inputs (or find them read): `analyzer.ingest.IngestError` when one cannot be,
    such as a damaged dump with no readable flow, before a page draws anything."""
    _timeline(source, sig)


@st.cache_data(max_entries=8, show_spinner="Running the detectors…")
def findings(source: Source, sig: Signature) -> pl.DataFrame:
    """Every finding of the registered detectors, in report order (analyzer.findings)."""
    # The registry is read at call time, not bound at import, so tests can plant detectors.
    return _run_detectors(_timeline(source, sig))


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


@st.cache_data(max_entries=8, show_spinner="Reading the capture…")
def overview(source: Source, sig: Signature) -> Overview:
    """What was read and how much of it there is."""
    return _overview_of(_timeline(source, sig))


def _overview_of(timeline: Timeline) -> Overview:
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


@st.cache_data(max_entries=8)
def sessions(source: Source, sig: Signature) -> pl.DataFrame:
    """The sessions (analyzer.schema.SESSIONS), earliest first."""
    return _timeline(source, sig).sessions.sort("start", "session_id", nulls_last=True).collect()


@st.cache_data(max_entries=8)
def recent_exchanges(source: Source, sig: Signature, limit: int = 50) -> pl.DataFrame:
    """The latest HTTP exchanges, newest first (the Live page)."""
    return _recent_of(_timeline(source, sig), limit)


def _recent_of(timeline: Timeline, limit: int) -> pl.DataFrame:
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


# -- Live ---------------------------------------------------------------------------------------


def _release_tail(entry: tuple[CaptureTail, str]) -> None:
    """An evicted (or cleared) reader lets its private folder go: removed once no Timeline it
    handed out is still in use (a rerun that holds one keeps reading it)."""
    entry[0].close()


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_release_tail)
def _capture_tail(path: str) -> tuple[CaptureTail, str]:
    """The Live page's reader of a growing capture, kept across reruns, and a token naming it
    (the loaders' cache key: a reader made again after eviction starts its versions over)."""
    return CaptureTail(path), uuid.uuid4().hex


@dataclass(frozen=True)
class LiveState:
    """What the Live page shows after one refresh."""

    key: str  # changes whenever the timeline does: the key of the live_* loaders
    files: Signature  # name, size and mtime (ns) of each capture file, in read order
    timeline: Timeline
    bytes_read: int  # by this refresh
    records_read: int  # by this refresh
    restarted: bool  # the files changed in a way appending cannot explain: read all again
    incremental: bool  # False for an input that is not a capture (read whole on a change)


def live_state(path: str) -> LiveState:
    """Refresh: read what a capture gained since the last refresh (a stat when nothing did).

    A capture is followed by one `CaptureTail` per path; any other input (a dump, a HAR file)
    is read whole through the per-signature loaders when its size or mtime changes.
    Raises `analyzer.ingest.IngestError` when the path holds nothing readable (yet).
    """
    if input_kind(Path(path)) != "capture":
        sig = signature((path,))
        return LiveState(f"sig:{sig!r}", sig, _timeline((path,), sig), 0, 0, False, False)
    tail, token = _capture_tail(path)
    if tail.version:
        polled = tail.poll()
    else:
        with st.spinner("Reading the capture…"):  # the first poll reads everything
            polled = tail.poll()
    return LiveState(
        key=f"{token}:{tail.version}",
        files=tail.files,
        timeline=tail.timeline(),
        bytes_read=polled.bytes_read,
        records_read=polled.records,
        restarted=polled.restarted,
        incremental=True,
    )


@st.cache_data(max_entries=4, show_spinner=False)
def live_overview(path: str, key: str, _timeline: Timeline) -> Overview:
    """`overview` of the Live page's timeline (one entry per state of the capture)."""
    return _overview_of(_timeline)


# A refresh reads the new bytes in milliseconds; the detectors take seconds on a large capture
# (~7 s at 200k events). While the capture grows they run at most this often, or three times as
# long as their last run took, whichever is longer; the page says how old its findings are.
LIVE_DETECT_EVERY_S = 10.0
LIVE_DETECT_FACTOR = 3.0


@dataclass(frozen=True)
class LiveFindings:
    """The Live page's findings: of the state shown (`current`) or of an earlier one."""

    findings: pl.DataFrame
    key: str  # the state they were found in
    records: int  # records read by then
    at: datetime  # when the run ended (UTC)
    seconds: float  # how long it took
    ended: float  # time.monotonic() at its end
    current: bool

    def wait_s(self) -> float:
        """How long after this run the next may start while the capture keeps changing."""
        return max(LIVE_DETECT_EVERY_S, LIVE_DETECT_FACTOR * self.seconds)


@st.cache_resource(max_entries=4, show_spinner=False)
def _live_runs(path: str) -> dict[str, LiveFindings]:
    """The last detector run of each watched path, kept across reruns (key "last")."""
    return {}


def live_findings(path: str, key: str, timeline: Timeline, records: int) -> LiveFindings:
    """`findings` of the Live page: run again when the state changed, at most every `wait_s`."""
    runs = _live_runs(path)
    last = runs.get("last")
    if last is not None:
        if last.key == key:
            return replace(last, current=True)
        if time.monotonic() - last.ended < last.wait_s():
            return replace(last, current=False)
    with st.spinner("Running the detectors…"):
        start = time.monotonic()
        found = _run_detectors(timeline)
        ended = time.monotonic()
    run = LiveFindings(found, key, records, datetime.now(UTC), ended - start, ended, True)
    runs["last"] = run
    return run


@st.cache_data(max_entries=4, show_spinner=False)
def live_recent_exchanges(
    path: str, key: str, _timeline: Timeline, limit: int = 50
) -> pl.DataFrame:
    """`recent_exchanges` of the Live page's timeline."""
    return _recent_of(_timeline, limit)


@st.cache_data(max_entries=64)
def payload_texts(source: Source, sig: Signature, hashes: tuple[str, ...]) -> dict[str, str]:
    """The text of these payloads (base64 for binary data), by data hash."""
    if not hashes:
        return {}
    return _timeline(source, sig).payload_text(list(hashes))


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


@st.cache_data(max_entries=16, show_spinner="Loading the session…")
def session_view(source: Source, sig: Signature, session_id: str) -> SessionView:
    """Every frame of one session, collected."""
    timeline = _timeline(source, sig)
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
        key: _preview(text)
        for key, text in payload_texts(source, sig, tuple(sorted(set(hashes.to_list())))).items()
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


@st.cache_data(max_entries=32, show_spinner="Collecting the evidence…")
def evidence(source: Source, sig: Signature, fingerprint: str) -> Evidence:
    """The timeline rows a finding's evidence names (looked up by its fingerprint)."""
    found = findings(source, sig).filter(pl.col("fingerprint") == fingerprint)
    if not found.height:
        raise KeyError(fingerprint)
    finding = found.row(0, named=True)
    timeline = _timeline(source, sig)
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
    texts = payload_texts(source, sig, tuple(sorted(set(hashes.to_list()))))
    return Evidence(
        finding=finding,
        events=events,
        calls=calls,
        exchanges=exchanges,
        incarnations=incarnations,
        resumptions=resumptions,
        between=between,
        texts=texts,
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
