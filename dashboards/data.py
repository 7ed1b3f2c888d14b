"""The dashboard's loaders: the analyzer's frames for one input, cached and bounded.

Every loader takes the inputs (`Source`: one path or several, merged into one analysis as by
`seamwatch analyze`) and their `signature` (name, size and mtime of each file read), so a capture
that grows (a running proxy's `.partial` file) gets new entries and an unchanged one is never
read twice; the analyzer's Parquet cache, keyed the same way, makes even a new entry cheap when
another process already parsed that state. The Live page instead follows a capture with one
`analyzer.ingest.tail.CaptureTail` per path (its timeline built by
`analyzer.analysis.LiveTimeline`), which reads only the bytes appended since the previous refresh
(`live_state` and the `live_*` loaders). Each cache has a bound (`max_entries`). Loaders return
plain Polars frames and small dataclasses; the analysis is the analyzer's (`read_timeline`,
`run_detectors`), its selection for display `dashboards.queries`' (streamlit-free): here it is
only cached.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import streamlit as st

from analyzer.analysis import LiveTimeline, read_timeline
from analyzer.ingest import input_kind
from analyzer.ingest.tail import CaptureTail
from analyzer.timeline import Timeline
from dashboards.launch import OPTIONS_ENV, SOURCE_ENV, decode_options, decode_source
from dashboards.queries import (
    LOSS_KEYS,
    PREVIEW_CHARS,
    Evidence,
    Overview,
    SessionView,
    Signature,
    Source,
    evidence_of,
    overview_of,
    recent_of,
    run_detectors,
    session_view_of,
    sessions_of,
    signature,
)

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


def source() -> Source | None:
    """The inputs the dashboard was started on (`seamwatch dashboard PATH...`), if any."""
    return decode_source(os.environ.get(SOURCE_ENV, ""))


def analysis_options() -> dict[str, str]:
    """The analysis options the dashboard was started with (`seamwatch dashboard --only ...`)."""
    return decode_options(os.environ.get(OPTIONS_ENV, ""))


@st.cache_resource(max_entries=2, show_spinner="Reading the capture…")
def _timeline(source: Source, sig: Signature) -> Timeline:
    """The analyzer's timeline of this state of the input (lazy scans of its Parquet cache)."""
    del sig  # the cache key only: read_timeline re-checks sizes and mtimes itself
    # Through the cache as `seamwatch analyze` reads it: a damaged entry is parsed again.
    options = analysis_options()
    return read_timeline(
        list(source),
        replica_header=options.get("replica_header"),
        client_header=options.get("client_header"),
        cache=options.get("no_cache") != "true",
    )


def check_readable(source: Source, sig: Signature) -> None:
    """Read the inputs (or find them read): `analyzer.ingest.IngestError` when one cannot be,
    such as a damaged dump with no readable flow, before a page draws anything."""
    _timeline(source, sig)


@st.cache_data(max_entries=8, show_spinner="Running the detectors…")
def findings(source: Source, sig: Signature) -> pl.DataFrame:
    """Every finding of the registered detectors, in report order (analyzer.findings)."""
    return run_detectors(_timeline(source, sig), analysis_options())


@st.cache_data(max_entries=8, show_spinner="Reading the capture…")
def overview(source: Source, sig: Signature) -> Overview:
    """What was read and how much of it there is."""
    return overview_of(_timeline(source, sig))


@st.cache_data(max_entries=8)
def sessions(source: Source, sig: Signature) -> pl.DataFrame:
    """The sessions (analyzer.schema.SESSIONS), earliest first."""
    return sessions_of(_timeline(source, sig))


@st.cache_data(max_entries=8)
def recent_exchanges(source: Source, sig: Signature, limit: int = 50) -> pl.DataFrame:
    """The latest HTTP exchanges, newest first (the Live page)."""
    return recent_of(_timeline(source, sig), limit)


# -- Live ---------------------------------------------------------------------------------------


def _release_tail(entry: tuple[LiveTimeline, str]) -> None:
    """An evicted (or cleared) reader lets its private folder go: removed once no Timeline it
    handed out is still in use (a rerun that holds one keeps reading it)."""
    entry[0].close()


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_release_tail)
def _capture_tail(path: str) -> tuple[LiveTimeline, str]:
    """The Live page's reader of a growing capture and the timeline built from it, kept across
    reruns, and a token naming it (the loaders' cache key: a reader made again after eviction
    starts its versions over)."""
    return LiveTimeline(CaptureTail(path)), uuid.uuid4().hex


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
    live, token = _capture_tail(path)
    tail = live.tail
    if tail.version:
        polled = tail.poll()
    else:
        with st.spinner("Reading the capture…"):  # the first poll reads everything
            polled = tail.poll()
    return LiveState(
        key=f"{token}:{tail.version}",
        files=tail.files,
        timeline=live.timeline(),
        bytes_read=polled.bytes_read,
        records_read=polled.records,
        restarted=polled.restarted,
        incremental=True,
    )


@st.cache_data(max_entries=4, show_spinner=False)
def live_overview(path: str, key: str, _timeline: Timeline) -> Overview:
    """`overview` of the Live page's timeline (one entry per state of the capture)."""
    return overview_of(_timeline)


# A refresh reads the new bytes in milliseconds; the detectors take seconds on a large
# capture. While the capture grows they run at most this often, or three times as
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
        found = run_detectors(timeline, analysis_options())
        ended = time.monotonic()
    run = LiveFindings(found, key, records, datetime.now(UTC), ended - start, ended, True)
    runs["last"] = run
    return run


@st.cache_data(max_entries=4, show_spinner=False)
def live_recent_exchanges(
    path: str, key: str, _timeline: Timeline, limit: int = 50
) -> pl.DataFrame:
    """`recent_exchanges` of the Live page's timeline."""
    return recent_of(_timeline, limit)


@st.cache_data(max_entries=64)
def payload_texts(source: Source, sig: Signature, hashes: tuple[str, ...]) -> dict[str, str]:
    """The text of these payloads (base64 for binary data), by data hash."""
    if not hashes:
        return {}
    return _timeline(source, sig).payload_text(list(hashes))


@st.cache_data(max_entries=16, show_spinner="Loading the session…")
def session_view(source: Source, sig: Signature, session_id: str) -> SessionView:
    """Every frame of one session, collected."""
    return session_view_of(
        _timeline(source, sig), session_id, lambda hashes: payload_texts(source, sig, hashes)
    )


@st.cache_data(max_entries=32, show_spinner="Collecting the evidence…")
def evidence(source: Source, sig: Signature, fingerprint: str) -> Evidence:
    """The timeline rows a finding's evidence names (looked up by its fingerprint)."""
    found = findings(source, sig).filter(pl.col("fingerprint") == fingerprint)
    if not found.height:
        raise KeyError(fingerprint)
    return evidence_of(
        _timeline(source, sig),
        found.row(0, named=True),
        lambda hashes: payload_texts(source, sig, hashes),
    )
