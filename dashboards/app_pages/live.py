"""Live: a running proxy's capture directory, re-read as it grows, without a restart.

Each refresh stats the capture files; when a size or mtime changed (the proxy appends to its
`*.jsonl.partial` and renames it on rotation) the loaders' keys change and the analyzer reads
the new state through its Parquet cache (keyed on the same sizes and mtimes); when nothing
changed, nothing is read. The reader treats a `.partial` file's last line as possibly torn.
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
path: str = source
st.text(f"Watching: {path}")

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
    """Re-stat the files and show what they hold now."""
    # A click reruns this fragment only, which re-stats the files.
    st.button("Refresh now", key="l_refresh")
    try:
        sig = data.signature(path)
    except IngestError as e:
        st.warning("Nothing to read yet:")
        st.text(str(e))
        return
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
    try:
        summary = data.overview(path, sig)
        found = data.findings(path, sig)
        recent = data.recent_exchanges(path, sig)
    except (IngestError, OSError) as e:
        # A rotation can rename a file between the stat and the read: the next refresh reads it.
        st.warning("The capture changed while it was read; refresh again:")
        st.text(str(e))
        return
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
        f"{'from the Parquet cache' if bool(summary.inputs['cached'].all()) else 'parsed now'}"
    )
    if summary.warnings:
        for warning in summary.warnings:
            st.text(f"• {warning}")
    st.subheader("Capture files")
    views.table(files, key="l_files")
    st.subheader("Latest exchanges")
    views.table(recent, key="l_recent")
    st.subheader("Findings")
    views.table(
        found.select(
            pl.col("severity").cast(pl.String), "detector", "session", "first_ts", "title"
        ),
        key="l_findings",
    )


if not Path(path).exists():
    st.warning("The path does not exist (yet).")
else:
    live()
