"""How complete the capture is: lost or skipped records, reader warnings, open streams.

Flags an input whose capture lost records (`seq` gaps, records the writer dropped at a full
queue or a failed write; high: loss is what this tool exists to expose, DESIGN.md §6), whose
reader skipped records (torn or corrupt lines, an unclean stop, stream bodies a dump did not
keep, a damaged dump; low: a finding may be missing or spurious where records are missing), or
that only carries notes (a BOM, a newer schema minor, duplicates, records the proxy's
retention deleted on purpose; info), and each session with
HTTP responses still open when the capture stopped (info: their losses are not judged), and
each session with JSON-RPC messages nested too deeply to read (low: a `tools/call` among them,
its arguments past what can be canonicalized, is missing from the tool calls, so
`repeated-tool-call` cannot judge it). What to change: stop the proxy cleanly after the traffic
under test ends, and give the capture writer disk and queue room.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import SEVERITY_DTYPE, Severity, emit, finding_rows
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

#: Damage kinds of an input report (`analyzer.ingest.common.DAMAGE` keys) that mean records
#: of the traffic are missing from the analysis; every other kind is a note.
LOSSES: Final = frozenset(
    {
        "torn_line",
        "corrupt_line",
        "invalid_utf8",
        "invalid_record",
        "seq_gap",
        "missing_close",
        "chunk_gap",
        "writer_dropped",
        "addon_errors",
        "body_missing",
        "undecoded_body",
        "har_missing_text",
        "har_bad_entry",
        "mitm_bad_flow",
        "mitm_damaged",
    }
)
#: Of those, the kinds that say the capture itself lost records of the traffic: high.
RECORDS_LOST: Final = frozenset({"seq_gap", "writer_dropped"})


def detect(timeline: Timeline) -> pl.LazyFrame:
    """Findings per damaged input and per session with streams open at capture end."""
    inputs = []
    for report in timeline.inputs:
        counts = {key: n for key, n in report.counts.items() if n}
        if not counts and not report.skipped and not report.warnings:
            continue
        name = PurePath(report.path).name
        lost = sorted(key for key in counts if key in LOSSES)
        lines = [f"{report.path}: {report.records} records read, {report.skipped} skipped."]
        lines += [f"- {warning}" for warning in report.warnings]
        if lost:
            lines.append("Findings may be missing or spurious where records are missing.")
        if RECORDS_LOST.intersection(lost):
            severity = Severity.HIGH
        else:
            severity = Severity.LOW if lost or report.skipped else Severity.INFO
        inputs.append(
            {
                "severity": severity,
                "title": f"{name}: " + "; ".join(report.warnings or ("records skipped",)),
                "detail": "\n".join(lines),
                # The file name and damage kinds, never the path or counts: the same capture
                # read from elsewhere keeps its fingerprint (DESIGN.md §5).
                "fingerprint_extra": [name, *sorted(counts)],
            }
        )
    open_at_shutdown = (
        timeline.exchanges.filter(pl.col("end_how") == "open_at_shutdown")
        .group_by("session_id")
        .agg(
            pl.col("era").sort_by("ts", "seq").first(),
            pl.col("flow_id").sort_by("ts", "seq").alias("flow_ids"),
            pl.col("stream_id")
            .sort_by("ts", "seq")
            .drop_nulls()
            .unique(maintain_order=True)
            .alias("stream_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.max_horizontal(pl.col("ts").max(), pl.col("end_ts").max()).alias("last_ts"),
        )
        .pipe(
            emit,
            title=text("{n} response(s) open at capture end", n=pl.col("flow_ids").list.len()),
            detail=pl.lit(
                "These HTTP responses were still open when the capture stopped: their losses "
                "and replays are not judged. Stop the proxy after the traffic under test ends."
            ),
            flow_ids="flow_ids",
            stream_ids="stream_ids",
        )
    )
    return pl.concat(
        [finding_rows(inputs), open_at_shutdown, _too_deep(timeline)], how="diagonal_relaxed"
    )


def _too_deep(timeline: Timeline) -> pl.LazyFrame:
    """Per session, the messages the JSON-RPC classifier could not read for their nesting."""
    return (
        timeline.messages.filter(pl.col("reason") == "too-deep")
        .join(
            timeline.exchanges.select("flow_id", "era").unique("flow_id"), on="flow_id", how="left"
        )
        .group_by("session_id")
        .agg(
            pl.col("era").sort_by("ts", "seq").first(),
            pl.col("flow_id").sort_by("ts", "seq").unique(maintain_order=True).alias("flow_ids"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .pipe(
            emit,
            severity=pl.lit(Severity.LOW.value, SEVERITY_DTYPE),
            title=text("{n} message(s) nested too deeply to read", n=pl.col("flow_ids").list.len()),
            detail=pl.lit(
                "These JSON-RPC messages nest deeper than can be parsed or canonicalized: a "
                "tools/call among them is missing from the tool calls, so a repeated call "
                "cannot be judged. Flatten the arguments, or look at these flows by hand."
            ),
            flow_ids="flow_ids",
        )
    )


DETECTOR: Final[Detector] = Detector(
    id="capture-health", severity=Severity.INFO, description=__doc__ or "", detect=detect
)
