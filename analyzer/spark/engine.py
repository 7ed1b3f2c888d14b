"""The Spark jobs of `analyze --engine spark`: ingest, sessions, cross-session judgements.

1. ingest (`mapInArrow`): each input read on an executor (`analyzer.spark.tasks.ingest_inputs`:
   parsed into the Parquet cache beside it, or read from it), its normalized tables yielded as
   Arrow blobs keyed by flow group (every flow of a session shares one).
2. sessions (`groupBy(bucket).applyInArrow`): the blobs repartitioned by a hash of their group;
   each bucket's sessions get their timeline and every selected detector, and yield their
   findings, the summary counts and the link rows of `analyzer.spark.links`.
3. cross-session: the link rows joined in Spark find the sessions a cross-session detector
   (`analyzer.detectors.CROSS_SESSION`) must judge together; those sessions' groups are split
   into connected components of the link graph (`analyzer.spark.components`) and each
   component is analyzed once more, for those detectors only; their findings replace the
   per-bucket ones of the same sessions.

Only findings, counts and input reports reach the driver.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import polars as pl
import pyarrow as pa

from analyzer import SeamwatchError
from analyzer.detectors import CROSS_SESSION
from analyzer.findings import FINDINGS_SCHEMA, empty_findings
from analyzer.ingest import InputReport
from analyzer.ingest.common import describe_counts
from analyzer.spark import tasks
from analyzer.spark.cache import SparkCache
from analyzer.spark.components import components
from analyzer.spark.files import Folder, by_file, folder_reports, plan_folder, read_folders
from analyzer.spark.inputs import Input, read_uri_inputs
from analyzer.spark.links import CALLS_VIA, LISTED_VIA, ORDER, window_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "Rows",
    "SparkResult",
    "SparkUnavailable",
    "by_bucket",
    "related_groups",
    "run",
    "session",
    "with_repeats",
]

DEFAULT_MASTER: Final = "local[2]"
# Buckets a session's rows hash into: several per core, so one large session does not hold a
# core while the others idle (and a bucket's timeline stays a fraction of the capture's).
_BUCKETS_PER_CORE: Final = 4


class SparkUnavailable(SeamwatchError):
    """pyspark is not installed, or Java is missing: the Spark engine cannot start."""


@dataclass(frozen=True)
class Rows:
    """The first stage's rows and the related groups, kept for a later pass over the sessions
    (the OTLP export, `analyzer.spark.traces`) until `release`."""

    records: DataFrame
    involved: DataFrame  # `group, component` (`related_groups`)
    bucketed: bool  # `records` is the cache's bucketed scan
    several_origins: bool  # `tasks.Options.several_origins`
    held: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        for frame in self.held:
            frame.unpersist()


@dataclass(frozen=True)
class SparkResult:
    """What the driver collects: the findings (unfinished), the summary, the input reports, and
    for each finding's first flow the input it came from; with `keep`, the rows (`Rows`)."""

    findings: pl.DataFrame
    counts: dict[str, int]
    inputs: tuple[InputReport, ...]
    flow_inputs: dict[str, int]
    cached: bool = False  # the first stage's rows came from the Spark cache (no parse)
    rows: Rows | None = None


def session(master: str = DEFAULT_MASTER, app: str = "seamwatch") -> SparkSession:
    """A SparkSession (the active one when there is one) whose Python workers run this
    interpreter: the executors import `analyzer` as the driver does."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SparkUnavailable("the Spark engine needs Java 17 (java not found; set JAVA_HOME)")
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(
            "the Spark engine needs pyspark: pip install 'seamwatch[spark]'"
        ) from e
    # pyspark 4.3 warns of pandas 3 at each Arrow UDF; the Arrow UDFs used here never convert
    # through pandas.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local mode binds to loopback, not to whatever address the host name resolves to.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Local mode's executors live in the driver's JVM (1 GiB by default): a bucket, and the
        # third stage's sessions, are buffered there whole before their Python task gets them.
        .config("spark.driver.memory", os.environ.get("SEAMWATCH_SPARK_DRIVER_MEMORY", "4g"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(
    spark: SparkSession,
    inputs: Sequence[Input],
    options: tasks.Options,
    *,
    already_read: dict[int, InputReport] | None = None,
    cache: SparkCache | None = None,
    keep: bool = False,
) -> SparkResult:
    """The three stages over `inputs` (those at the indexes of `already_read` are not read:
    their reports are given). With `cache`, the first stage's rows are read from that entry
    when complete, else written to it; either way the second stage reads it bucketed. `keep`:
    the rows are kept for the caller (`SparkResult.rows`, to release)."""
    from pyspark.sql import functions as F

    skipped = already_read or {}
    entry = cache
    # The cache's bucketed table is read a bucket a task (analyzer.spark.cache), also under a
    # mapInArrow, which Spark's automatic choice would read as plain files.
    spark.conf.set("spark.sql.sources.bucketing.enabled", "true")
    spark.conf.set("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    if entry is not None and entry.complete(spark):
        reports = {**skipped, **entry.reports(spark)}
        records = entry.records(spark)
        ingested = None
    else:
        folders = {
            i: folder
            for i, one in enumerate(inputs)
            if i not in skipped and not one.uri
            for folder in [plan_folder(i, one.name, options)]
            if folder is not None
        }
        ingested, held, folders = _ingest(spark, inputs, skipped, options, folders)
        ingested = ingested.persist()
        reports = dict(skipped)
        parts = []
        said = F.col("table").isin("report", "part")
        for row in ingested.filter(said).select("input", "table", "blob").collect():
            if row["table"] == "part":
                parts.append((int(row["input"]), bytes(row["blob"])))
            else:
                reports[int(row["input"])] = tasks.report_of(bytes(row["blob"]))
        reports.update(folder_reports(parts, folders))
        for frame in held:
            frame.unpersist()
        records = ingested.filter(~said)
        if entry is not None:
            read = {i: r for i, r in reports.items() if i not in skipped}
            entry.write(spark, records, read)
            records = entry.records(spark)
    options = replace(options, several_origins=_several_origins(records))
    first = _sessions(spark, records, options, bucketed=entry is not None).persist()
    involved = related_groups(first, window_of(options.detectors, options.config))
    crossing = tuple(d for d in options.detectors if d in CROSS_SESSION)
    together = replace(options, detectors=crossing)

    def cross(table: pa.Table) -> pa.Table:
        return tasks.analyze_groups(table, together, links=False)

    # One judgement a component: its groups hold every session its sessions' links reach.
    second = (
        records.join(involved, on="group", how="inner")
        .groupBy("component")
        .applyInArrow(cross, tasks.ANALYSIS_OUT_DDL)
    )
    judged_together = (
        first.filter(F.col("what") == "session")
        .join(involved.select(F.col("group").alias("key")), on="key", how="left_semi")
        .select("session")
    )
    found = first.filter(F.col("what") == "finding")
    crossed = F.col("detector").isin(list(CROSS_SESSION))
    kept = (
        found.filter(~crossed)
        .unionByName(
            found.filter(crossed & F.col("session").isNotNull()).join(
                judged_together, on="session", how="left_anti"
            )
        )
        .unionByName(second.filter(F.col("what") == "finding"))
    )
    rows = kept.select("input", "blob").collect()
    findings = tasks.unpack([bytes(r["blob"]) for r in rows], FINDINGS_SCHEMA)
    if findings.is_empty():
        findings = empty_findings()
    flow_inputs = {
        str(flows[0]): int(r["input"])
        for r, flows in zip(rows, findings["flow_ids"].to_list(), strict=True)
        if r["input"] is not None and flows
    }
    counts = {
        str(r["key"]): int(r["n"])
        for r in first.filter(F.col("what") == "count")
        .groupBy("key")
        .agg(F.sum("n").alias("n"))
        .collect()
    }
    dropped = {
        int(r["input"]): int(r["n"])
        for r in first.filter(F.col("what") == "duplicate_flow")
        .groupBy("input")
        .agg(F.sum("n").alias("n"))
        .collect()
    }
    first.unpersist()
    kept_rows = None
    if keep:
        # The related groups are the driver's table or checkpointed labels: not `first`'s.
        persisted = () if ingested is None else (ingested,)
        several = bool(options.several_origins)
        kept_rows = Rows(records, involved, entry is not None, several, held=persisted)
    elif ingested is not None:
        ingested.unpersist()
    return SparkResult(
        findings=findings,
        counts=counts,
        inputs=tuple(with_repeats(reports[i], dropped.get(i, 0)) for i in sorted(reports)),
        flow_inputs=flow_inputs,
        cached=ingested is None,
        rows=kept_rows,
    )


def _ingest(
    spark: SparkSession,
    inputs: Sequence[Input],
    skipped: dict[int, InputReport],
    options: tasks.Options,
    folders: Mapping[int, Folder],
) -> tuple[DataFrame, list[DataFrame], dict[int, Folder]]:
    """Stage 1: the `RECORDS` rows of the inputs not `skipped`: a capture folder of `folders`
    or a URI folder of two files or more a task a file (`analyzer.spark.files`), any other
    input one task: a local path read where it is, a URI's files read by Spark and sent to its
    task (`analyzer.spark.inputs`). Also the frames to unpersist once those rows are computed,
    and every folder read by file (the URI folders planned too)."""
    todo = [
        (i, one.name)
        for i, one in enumerate(inputs)
        if i not in skipped and not one.uri and i not in folders
    ]
    unread = {i: one for i, one in enumerate(inputs) if i not in skipped and one.uri}
    split = {i: one for i, one in unread.items() if by_file(one)}
    remote = {i: one for i, one in unread.items() if i not in split}
    parts = []
    held: list[DataFrame] = []
    planned = dict(folders)
    if folders or split:
        by_files, held, planned = read_folders(spark, folders, split, options)
        parts.append(by_files)
    if todo or not (remote or planned):
        listed = spark.createDataFrame(todo, "input int, path string").repartition(
            max(1, len(todo)), "input"
        )

        def ingest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return tasks.ingest_inputs(batches, options)

        parts.append(listed.mapInArrow(ingest, tasks.RECORDS_DDL))
    if remote:
        parts.append(read_uri_inputs(spark, remote, options))
    rows = parts[0]
    for more in parts[1:]:
        rows = rows.unionByName(more)
    return rows, held, planned


def _sessions(
    spark: SparkSession, records: DataFrame, options: tasks.Options, *, bucketed: bool
) -> DataFrame:
    """Stage 2: each bucket of session groups analyzed."""

    def analyze(table: pa.Table) -> pa.Table:
        return tasks.analyze_groups(table, options, links=True)

    return by_bucket(spark, records, analyze, tasks.ANALYSIS_OUT_DDL, bucketed=bucketed)


def by_bucket(
    spark: SparkSession,
    records: DataFrame,
    analyze: Callable[[pa.Table], pa.Table],
    schema: str,
    *,
    bucketed: bool,
) -> DataFrame:
    """`analyze` run on each bucket of `records`' session groups, whole sessions, yielding rows
    of the DDL `schema`. `bucketed`: `records` is the cache's bucketed scan (a bucket a
    partition: no shuffle), else they are grouped by a hash."""
    from pyspark.sql import functions as F

    if bucketed:
        buckets = records.rdd.getNumPartitions()
        # Spark's bucket of a row: what the task checks its partition holds only one of.
        hashed = records.withColumn("bucket", F.pmod(F.hash("group"), F.lit(buckets)))

        def bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return tasks.one_bucket(batches, analyze)

        return hashed.mapInArrow(bucket, schema)
    count = bucket_count(spark)
    return (
        records.withColumn("bucket", F.pmod(F.xxhash64("group"), F.lit(count)))
        .groupBy("bucket")
        .applyInArrow(analyze, schema)
    )


def _several_origins(records: DataFrame) -> bool:
    """Whether some run reaches several origins, judged over every input's flows (`key_flows`:
    a bucket sees its own only). Spark counts each run's origins; one row reaches the driver."""
    origins = (
        records.filter("table = 'flows'")
        .select("blob")
        .mapInArrow(tasks.run_origins, tasks.RUN_ORIGINS_DDL)
        .filter("origin IS NOT NULL")
        .distinct()
    )
    return bool(origins.groupBy("run_id").count().filter("count > 1").limit(1).collect())


def bucket_count(spark: SparkSession) -> int:
    """The buckets a session's rows hash into (a cache entry's count, in its key)."""
    return _BUCKETS_PER_CORE * spark.sparkContext.defaultParallelism


def with_repeats(report: InputReport, repeated: int) -> InputReport:
    """An input's report counting the flows an earlier input held too (as `read_inputs`)."""
    if not repeated:
        return report
    counts = {**report.counts, "duplicate_flow": repeated}
    return replace(report, counts=counts, warnings=describe_counts(counts))


def related_groups(first: DataFrame, window_s: float | None) -> DataFrame:
    """`group, component` of every session some live link relates to another
    (`analyzer.spark.links`): the groups of one component are judged together. `window_s`:
    `repeated-tool-call`'s window (None when it does not run: tool calls relate nothing)."""
    from pyspark.sql import functions as F

    links = first.filter(F.col("what") == "link").select("key", "session", "wants", "via", "ts")
    is_call = F.col("key").startswith("call:")
    call_wants = F.col("via").contains(CALLS_VIA)
    if window_s is None:
        links = links.filter(~is_call & (~call_wants | F.col("via").isNull()))
    else:
        # Computed once: every step below reads the chained rows, and the optimizer, given the
        # windows and joins in each of those plans, takes minutes to plan them.
        links = _chained(links, window_s).localCheckpoint()
    calls = (
        links.filter(is_call)
        .groupBy("key")
        .agg(F.countDistinct("session").alias("sessions"), F.count("*").alias("calls"))
    )
    repeated = calls.filter(F.col("calls") >= 2).select(
        F.concat(F.lit(CALLS_VIA), "key").alias("via")
    )
    wanted = links.filter(F.col("wants"))
    # A tool whose listings differ in hints: a call listed in its own session still reads the
    # others (the latest one before it decides).
    offered = links.filter(~F.col("wants") & F.col("key").startswith("list:"))
    mixed = offered.groupBy("key").agg(F.countDistinct("via").alias("hints")).filter("hints > 1")
    listed = wanted.filter(F.col("via").startswith(LISTED_VIA)).join(
        mixed.select("key"), on="key", how="left_semi"
    )
    unlisted = wanted.filter(~F.col("via").startswith(LISTED_VIA))
    active = (
        wanted.filter(F.col("via").isNull())
        .unionByName(unlisted.join(repeated, on="via", how="left_semi"))
        .unionByName(
            listed.withColumn("via", F.expr(f"substring(via, {len(LISTED_VIA) + 1})")).join(
                repeated, on="via", how="left_semi"
            )
        )
        .select("key")
        .distinct()
    )
    shared = (
        links.join(active, on="key", how="left_semi")
        .groupBy("key")
        .agg(F.countDistinct("session").alias("sessions"))
        .filter(F.col("sessions") >= 2)
        .select("key")
    )
    groups = first.filter(F.col("what") == "session").select("session", F.col("key").alias("node"))
    memberships = (
        links.join(shared, on="key", how="left_semi")
        .select("key", "session")
        .unionByName(_next_sessions(first, links, calls.filter(F.col("sessions") >= 2)))
        .join(groups, on="session")
        .select("key", "node")
    )
    return components(memberships).withColumnRenamed("node", "group")


def _chained(links: DataFrame, window_s: float) -> DataFrame:
    """`links` with each tool-call key split into chains: its calls in time order, a new
    chain where one comes more than `window_s` after the one before (or has no time).

    `repeated-tool-call` pairs a call with the one of its key just before it, and flags it
    only within `window_s`: such a pair is always in one chain, so only a chain's sessions
    need judging together. The call's key becomes `<key>#<chain>`, in its call row and in the
    listing wants of that call (`via`, found by session and time)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # A millisecond more: the rule compares the gap in whole milliseconds.
    limit = int(window_s * 1_000_000_000) + 1_000_000
    calls = links.filter(F.col("key").startswith("call:"))
    order = Window.partitionBy("key").orderBy("ts")
    gap = F.col("ts") - F.lag("ts").over(order)
    starts = F.when(F.col("ts").isNull() | gap.isNull() | (gap > limit), 1).otherwise(0)
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    chained = (
        calls.withColumn("start", starts)
        .withColumn("chain", F.sum("start").over(running))
        .withColumn("chained", F.concat("key", F.lit("#"), F.col("chain").cast("string")))
    )
    of_call = chained.select(
        F.col("key").alias("call"), "session", "ts", F.col("chained").alias("call_chain")
    ).distinct()
    call_wants = F.col("via").contains(CALLS_VIA)
    prefix = F.when(F.col("via").startswith(LISTED_VIA), F.lit(LISTED_VIA)).otherwise(F.lit(""))
    wants = (
        links.filter(call_wants)
        .withColumn("prefix", prefix)
        .withColumn("call", F.expr(f"substring(via, length(prefix) + {len(CALLS_VIA) + 1})"))
        .join(of_call, on=["call", "session", "ts"])
        .withColumn("via", F.concat("prefix", F.lit(CALLS_VIA), "call_chain"))
        .select("key", "session", "wants", "via", "ts")
    )
    rest = links.filter(~F.col("key").startswith("call:") & (F.col("via").isNull() | ~call_wants))
    return rest.unionByName(
        chained.select(F.col("chained").alias("key"), "session", "wants", "via", "ts")
    ).unionByName(wants)


def _next_sessions(first: DataFrame, links: DataFrame, across: DataFrame) -> DataFrame:
    """`key, session` rows relating each session that holds a call key of `across` (keys two
    sessions or more hold; of the `links` rows) to the sessions of its client that start with
    it or next (`analyzer.spark.links`: ORDER)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = (
        first.filter((F.col("what") == "link") & F.col("key").startswith(ORDER))
        .select(F.col("key").alias("client"), "session", "ts")
        .withColumn("place", F.dense_rank().over(Window.partitionBy("client").orderBy("ts")))
    )
    calling = (
        links.filter(F.col("key").startswith("call:"))
        .join(across.select("key"), on="key", how="left_semi")
        .select("session")
        .distinct()
    )
    asking = order.join(calling, on="session", how="left_semi").select(
        F.col("client").alias("of_client"),
        F.col("place").alias("from"),
        F.col("session").alias("asker"),
    )
    near = (F.col("of_client") == F.col("client")) & F.col("place").between(
        F.col("from"), F.col("from") + 1
    )
    return asking.join(order, on=near).select(
        F.concat(F.lit("next:"), "asker").alias("key"), "session"
    )
