"""Live: a running proxy's capture directory, followed as it grows, without a restart.

One `analyzer.ingest.tail.CaptureTail` per path, kept across reruns, remembers how far it read
each capture file. Each refresh stats the files and reads only the bytes appended since the
previous one (the proxy appends to its `*.jsonl.partial` file and renames it on rotation: a
renamed file keeps its offset); a torn last line waits for its line end; when nothing changed,
nothing is read and the timeline, numbers and findings are the ones already computed. Streams
still open show their events so far. Another kind of input (a dump, a HAR file) is read whole
when its size or mtime changes. The detectors take seconds on a large capture: while it grows
they run at most every `data.LIVE_DETECT_EVERY_S` (or three times their last run's duration),
and until they run again the page says which earlier state its findings are of.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import streamlit as st

from analyzer.ingest import IngestError
from dashboards import data, views

st.title("Live")
source = data.source()
if source is None:
    st.info(
        "No input: start the dashboard on a proxy's capture directory, e.g. "
        "`seamwatch dashboard seamwatch-capture/`."
    )
    st.stop()
if len(source) > 1:
    st.info(
        "The Live page follows one input: start the dashboard on a single capture directory "
        "to watch it grow. The other pages show these inputs merged."
    )
    st.stop()
(path,) = source
views.text(f"Watching: {path}")

cols = st.columns([2, 2, 4])
auto = cols[0].toggle("Refresh automatically", value=False, key="l_auto")
every = cols[1].selectbox(
    "Every",
    [2, 5, 10, 30],
    index=1,
    format_func=lambda s: f"{s} s",
    key="l_every",
    disabled=not auto,
)


@st.fragment(run_every=every if auto else None)
def live() -> None:
    """Read what the files gained and show what they hold now."""
    # A click reruns this fragment only, which polls the files.
    st.button("Refresh now", key="l_refresh")
    try:
        state = data.live_state(path)
    except (IngestError, OSError) as e:
        st.warning("Nothing to read yet:")
        views.text(str(e))
        return
    sig = state.files
    if not sig:
        st.warning("No capture files yet.")
        return
    files = pl.DataFrame(
        {
            "file": [name for name, _, _ in sig],
            "bytes": [size for _, size, _ in sig],
            "modified (UTC)": [datetime.fromtimestamp(m / 1e9, UTC) for _, _, m in sig],
            "state": [
                "being written" if name.endswith(".partial") else "closed" for name, _, _ in sig
            ],
        }
    )
    summary = data.live_overview(path, state.key, state.timeline)
    detected = data.live_findings(path, state.key, state.timeline, summary.records)
    found = detected.findings
    recent = data.live_recent_exchanges(path, state.key, state.timeline)
    writing = int(files["state"].eq("being written").sum())
    metrics = st.columns(6)
    metrics[0].metric("Files", files.height, help=f"{writing} being written (.partial)")
    metrics[1].metric("Bytes", f"{int(files['bytes'].sum()):,}")
    metrics[2].metric("Records read", f"{summary.records:,}")
    metrics[3].metric("Sessions", f"{summary.sessions:,}")
    metrics[4].metric("Streams", f"{summary.streams:,}")
    metrics[5].metric("Findings", f"{found.height:,}")
    last = summary.last_ts
    st.text(
        f"Read at {datetime.now(UTC):%H:%M:%S} UTC · last record "
        f"{'none' if last is None else f'{last:%H:%M:%S.%f} UTC'} · "
        f"{_what_was_read(state)}"
    )
    if summary.warnings:
        for warning in summary.warnings:
            views.text(f"• {warning}")
    st.subheader("Capture files")
    views.table(files, key="l_files")
    st.subheader("Latest exchanges")
    views.table(recent, key="l_recent")
    st.subheader("Findings")
    if not detected.current:
        st.text(
            f"Findings as of {detected.at:%H:%M:%S} UTC, "
            f"{summary.records - detected.records:,} records ago: the detectors took "
            f"{detected.seconds:.1f} s, so while the capture grows they run at most every "
            f"{detected.wait_s():.0f} s."
        )
    views.table(
        found.select(
            pl.col("severity").cast(pl.String), "detector", "session", "first_ts", "title"
        ),
        key="l_findings",
    )


def _what_was_read(state: data.LiveState) -> str:
    if not state.incremental:
        return "read whole (not a capture)"
    if state.restarted:
        return "read again from the start (the files changed in place)"
    if not state.bytes_read:
        return "no new bytes"
    return f"{state.bytes_read:,} new bytes read, {state.records_read:,} records"


if not Path(path).exists():
    st.warning("The path does not exist (yet).")
else:
    live()
