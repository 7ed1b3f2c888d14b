"""`analyze --format otlp-json --engine spark`: the OTLP document, built where the timelines are.

Once the findings are final (the cross-session ones are known only after the third stage), two
passes over the first stage's rows (`analyzer.spark.engine.Rows`):

1. drafts: each session's spans but the findings' events (`analyzer.otlp.spans.SpanDrafts`),
   built in the executors from its group's timeline. A component of related groups (the third
   stage's: it holds every session a resume's cursor may come from, so a resume links into the
   trace of the session that issued it) is one task, the other groups a bucket a task (as the
   second stage). Each task yields its traces (pickled drafts, kept on the executors' disks)
   and, for every finding, the span of its first evidence it holds, ranked
   (`SpanDrafts.evidence`): the findings are broadcast, not joined (they are few).
2. texts: the driver takes the least ranked span of each finding (a finding that none holds
   gets a root of its own, `CaptureRoots`, made on the driver) and broadcasts where each goes;
   each task puts its findings on its drafts, freezes them and yields each trace's text; the
   traces, sorted as the default engine sorts them (`trace_order`), reach the driver a
   partition at a time (`toLocalIterator`) and are written as they come
   (`write_otlp_json`).

So the document is the default engine's, byte for byte: the same spans (a session's spans
depend on its own timeline, and on the sessions its resumes' cursors came from), the same
finding on the same span, in the same order. The driver holds the findings, each finding's
chosen span and one partition of trace texts, never the record-level rows nor the document.
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl
import pyarrow as pa

from analyzer.findings import FINDINGS_SCHEMA
from analyzer.otlp.evidence import CaptureRoots, add_finding, finding_rows
from analyzer.otlp.spans import SpanDrafts
from analyzer.otlp.wire import span_json, write_otlp_json
from analyzer.scratch import scratch_prefix
from analyzer.spark.engine import by_bucket
from analyzer.spark.tasks import pack, raw_tables, unpack
from analyzer.timeline import build_timeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from analyzer.spark.engine import Rows

__all__ = [
    "DRAFTS",
    "DRAFTS_DDL",
    "PARTITION_BYTES",
    "TEXTS",
    "TEXTS_DDL",
    "TraceText",
    "draft_traces",
    "export_traces",
    "place_findings",
    "span_hex",
    "trace_texts",
    "write_document",
]

#: What a drafting task yields: `what` is `trace` (start and span of its root, blob: its
#: pickled drafts) or `finding` (finding: its index, rank and span: where it would go).
DRAFTS: Final = pa.schema(
    [
        ("what", pa.string()),
        ("start", pa.int64()),
        ("span", pa.string()),
        ("finding", pa.int32()),
        ("rank", pa.int32()),
        ("blob", pa.binary()),
    ]
)
DRAFTS_DDL: Final = "what string, start long, span string, finding int, rank int, blob binary"

#: A trace's text (its spans' `span_json` joined by commas) and where it goes.
TEXTS: Final = pa.schema([("start", pa.int64()), ("span", pa.string()), ("text", pa.string())])
TEXTS_DDL: Final = "start long, span string, text string"

#: Bytes of drafts per partition of the sorted traces: about what the driver holds at once.
PARTITION_BYTES: Final = 16 * 1024 * 1024


def span_hex(span_id: int) -> str:
    """A span id as OTLP/JSON writes it: 16 hex digits, ordered as the ids are."""
    return f"{span_id:016x}"


def draft_traces(
    records: pa.Table, findings: bytes, *, payloads: bool, several_origins: bool
) -> pa.Table:
    """`applyInArrow` (or a bucket's `mapInArrow`) over the `RECORDS` rows of whole sessions:
    their spans drafted, yielding `DRAFTS` rows: each trace, and where each finding of
    `findings` (`pack`ed) would go among them."""
    raw, _ = raw_tables(records)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark")) as spill:
        timeline = build_timeline(raw, (), spill_dir=Path(spill), several_origins=several_origins)
        drafts = SpanDrafts(timeline, payloads=payloads)
    for index, finding in enumerate(finding_rows(unpack([findings], FINDINGS_SCHEMA))):
        placed = drafts.evidence(finding)
        if placed is not None:
            rank, span = placed
            row = {
                "what": "finding",
                "finding": index,
                "rank": rank,
                "span": span_hex(span.span_id),
            }
            rows.append(row)
    for root, spans in drafts.traces():
        rows.append(
            {
                "what": "trace",
                "start": root.start,
                "span": span_hex(root.span_id),
                "blob": pickle.dumps(spans, protocol=pickle.HIGHEST_PROTOCOL),
            }
        )
    return pa.Table.from_pylist(rows, schema=DRAFTS)


def trace_texts(
    batches: Iterator[pa.RecordBatch], findings: bytes, targets: Mapping[str, Sequence[int]]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `DRAFTS` trace rows: each trace given its findings (`targets`: span ->
    the indexes of the findings it holds, in their order) and written, as `TEXTS` rows."""
    rows = finding_rows(unpack([findings], FINDINGS_SCHEMA))
    for batch in batches:
        out: list[dict[str, object]] = []
        for start, span, blob in zip(
            batch.column("start").to_pylist(),
            batch.column("span").to_pylist(),
            batch.column("blob").to_pylist(),
            strict=True,
        ):
            spans = pickle.loads(blob)  # written by `draft_traces` in this run
            out.append({"start": start, "span": span, "text": _text(spans, rows, targets)})
        yield pa.RecordBatch.from_pylist(out, schema=TEXTS)


def _text(
    spans: list[Any], findings: Sequence[Mapping[str, Any]], targets: Mapping[str, Sequence[int]]
) -> str:
    for span in spans:
        for index in targets.get(span_hex(span.span_id), ()):
            add_finding(span, findings[index])
    return ",".join(span_json(span.freeze()) for span in spans)


def export_traces(
    spark: SparkSession,
    rows: Rows,
    findings: pl.DataFrame,
    *,
    payloads: bool,
    write: Callable[[str], object],
    partition_bytes: int = PARTITION_BYTES,
) -> None:
    """Write the OTLP/JSON document of the sessions of `rows` and the `findings` (final, in
    report order) with `write`, a piece at a time; the sorted traces reach the driver in
    partitions of about `partition_bytes` of drafts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    shipped = spark.sparkContext.broadcast(pack(findings))
    several = rows.several_origins  # the closure ships to the executors: not `rows` itself

    def draft(table: pa.Table) -> pa.Table:
        return draft_traces(table, shipped.value, payloads=payloads, several_origins=several)

    related = (
        rows.records.join(rows.involved, on="group", how="inner")
        .groupBy("component")
        .applyInArrow(draft, DRAFTS_DDL)
    )
    # A broadcast join keeps the bucketed scan's partitions, a bucket a task.
    alone = rows.records.join(F.broadcast(rows.involved.select("group")), "group", "left_anti")
    drafts = related.unionByName(
        by_bucket(spark, alone, draft, DRAFTS_DDL, bucketed=rows.bucketed)
    ).persist(StorageLevel.DISK_ONLY)
    try:
        best = F.min(F.struct("rank", "span")).alias("best")
        placed = {
            int(r["finding"]): str(r["best"]["span"])
            for r in drafts.filter(F.col("what") == "finding")
            .groupBy("finding")
            .agg(best)
            .collect()
        }
        traces = drafts.filter(F.col("what") == "trace")
        sizes = traces.agg(F.min("start").alias("earliest"), F.sum(F.length("blob")).alias("bytes"))
        (size,) = sizes.collect()
        targets, captured = place_findings(findings, placed, size["earliest"])
        sent = spark.sparkContext.broadcast(targets)

        def texts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return trace_texts(batches, shipped.value, sent.value)

        parts = max(1, -(-int(size["bytes"] or 0) // partition_bytes))
        # Sorted before the texts are made: the range partitioner samples what it sorts, and
        # the drafts on disk are cheaper to read twice than the texts to make twice.
        ordered = (
            traces.select("start", "span", "blob")
            .repartitionByRange(parts, "start", "span")
            .sortWithinPartitions("start", "span")
            .mapInArrow(texts, TEXTS_DDL)
        )
        sorted_texts = ((r["start"], r["span"], r["text"]) for r in ordered.toLocalIterator())
        write_document(sorted_texts, captured, write)
        sent.unpersist()
    finally:
        drafts.unpersist()
        shipped.unpersist()


#: A trace's place in the document (`trace_order`: its root's start and span id) and its text.
TraceText = tuple[int, str, str]


def place_findings(
    findings: pl.DataFrame, placed: Mapping[int, str], earliest: int | None
) -> tuple[dict[str, list[int]], list[TraceText]]:
    """Where the findings go: span -> the indexes of the findings it holds, in their order, for
    those the tasks placed (`placed`: finding index -> the least ranked span); the others on
    roots of their own (`CaptureRoots`; `earliest`: the earliest session's start), as the
    texts of those traces, sorted."""
    targets: dict[str, list[int]] = defaultdict(list)
    capture = CaptureRoots(earliest)
    for index, finding in enumerate(finding_rows(findings)):
        if index in placed:
            targets[placed[index]].append(index)
        else:
            add_finding(capture.root(finding), finding)
    captured = sorted(
        (root.start, span_hex(root.span_id), ",".join(span_json(s.freeze()) for s in spans))
        for root, spans in capture.traces()
    )
    return dict(targets), captured


def write_document(
    texts: Iterable[TraceText], captured: Sequence[TraceText], write: Callable[[str], object]
) -> None:
    """The document of the traces `texts` (sorted, from the tasks) and `captured` (sorted, from
    `place_findings`), in their order, written a trace at a time."""
    merged = heapq.merge(texts, captured)
    write_otlp_json((text for _, _, text in merged), write)
