"""`seamwatch analyze --engine spark`: the same analysis, run by Apache Spark (docs/spark.md).

The detectors stay the Polars code they are; Spark moves the normalized tables between
executors and runs the existing ingest, timeline and detectors on them, a session's rows always
together (`analyzer.spark.engine`). `analyze_spark` gives the `analyze` report of the default
engine: the same findings, summary and inputs. pyspark is an optional extra (`seamwatch[spark]`)
and needs Java 17; it is imported only when this engine runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analyzer import SeamwatchError
from analyzer import schema as S
from analyzer.detectors import ANALYSIS_ERROR, DetectorConfig, run_detectors, select_detectors
from analyzer.findings import Severity, finish_findings
from analyzer.ingest import IngestError, InputReport
from analyzer.normalize import NormalizedFrames
from analyzer.report import InputSummary, Report
from analyzer.spark.cache import SparkCache, default_location, entry_key, inputs_id
from analyzer.spark.engine import DEFAULT_MASTER, SparkResult, SparkUnavailable, bucket_count
from analyzer.spark.inputs import Input, list_inputs
from analyzer.spark.tasks import Options
from analyzer.timeline import RawTables, build_timeline

__all__ = [
    "DEFAULT_MASTER",
    "OtlpOut",
    "SparkUnavailable",
    "UnreadableSparkInput",
    "analyze_spark",
    "spark_findings",
]


class UnreadableSparkInput(SeamwatchError):
    """An input the Spark engine cannot analyze at all (an `IngestError` of its reading)."""


@dataclass(frozen=True)
class OtlpOut:
    """`--format otlp-json`: the OTLP/JSON document goes to `write`, a piece at a time, while the
    run's rows are still there; `payloads`: `--otlp-payloads`."""

    write: Callable[[str], object]
    payloads: bool = False
    #: Bytes of span drafts per partition of the sorted traces, about what the driver holds at
    #: once (None: `analyzer.spark.traces.PARTITION_BYTES`).
    partition_bytes: int | None = None


def spark_findings(
    paths: Sequence[str | Path],
    *,
    master: str = DEFAULT_MASTER,
    replica_header: str | None = None,
    client_header: str | None = None,
    cache: bool = True,
    cache_dir: str | None = None,
    only: Sequence[str] | None = None,
    disable: Sequence[str] | None = None,
    config: DetectorConfig | None = None,
    otlp: OtlpOut | None = None,
) -> SparkResult:
    """Run the Spark engine on `paths`: the findings in report order, the summary counts and
    the input reports. `cache_dir`: where the Spark cache lives (a URI; by default, in local
    mode, beside the first input: `analyzer.spark.cache`); `cache=False`: none. `otlp`: also
    write the OTLP document of the sessions and findings."""
    from analyzer.spark import engine

    chosen = select_detectors(only=only, disable=disable)
    options = Options(
        replica_header=replica_header,
        client_header=client_header,
        cache=cache,
        detectors=tuple(det.id for det in chosen),
        config=config,
    )
    spark = engine.session(master)
    names = [str(p) for p in paths]
    inputs = list_inputs(spark, names)
    repeated = _repeated_inputs(inputs)
    entry = None
    location = (cache_dir or default_location(master, names)) if cache else None
    uris = [one.name if one.uri else Path(one.name).resolve().as_uri() for one in inputs]
    if location is not None:
        files = [f for i, one in enumerate(inputs) if i not in repeated for f in one.files]
        key = entry_key(files, options, bucket_count(spark), list(repeated))
        entry = SparkCache(location, inputs_id(uris), key, bucket_count(spark))
        entry.touch(spark, uris)
    result = engine.run(
        spark, inputs, options, already_read=repeated, cache=entry, keep=otlp is not None
    )
    if entry is not None:
        # Other keys' entries only: the rows kept for the OTLP export are this entry's.
        entry.prune(spark)
    try:
        findings = pl.concat([result.findings, _input_findings(result.inputs, options)])
        # An analysis error is about the run, not a session: each bucket that met it reported it.
        errors = pl.col("detector") == ANALYSIS_ERROR
        findings = finish_findings(
            pl.concat(
                [
                    findings.filter(~errors),
                    findings.filter(errors).unique("fingerprint", keep="first"),
                ]
            )
        )
        if otlp is not None and result.rows is not None:
            # OpenTelemetry is imported only when OTLP is asked for (docs/otlp.md).
            from analyzer.spark.traces import PARTITION_BYTES, export_traces

            export_traces(
                spark,
                result.rows,
                findings,
                payloads=otlp.payloads,
                write=otlp.write,
                partition_bytes=otlp.partition_bytes or PARTITION_BYTES,
            )
    finally:
        if result.rows is not None:
            result.rows.release()
    return SparkResult(
        findings=findings,
        counts=result.counts,
        inputs=result.inputs,
        flow_inputs=result.flow_inputs,
        cached=result.cached,
    )


def _repeated_inputs(inputs: Sequence[Input]) -> dict[int, InputReport]:
    """The inputs whose files an earlier input already named, with the report `read_inputs`
    gives them (they are not read again)."""
    seen: set[str] = set()
    repeated: dict[int, InputReport] = {}
    for index, one in enumerate(inputs):
        files = {f.uri for f in one.files}
        if files <= seen:
            repeated[index] = InputReport(
                one.name, one.kind, 0, 0, {"duplicate_input": 1}, ("already read",), ()
            )
        seen |= files
    return repeated


def _input_findings(inputs: Sequence[InputReport], options: Options) -> pl.DataFrame:
    """The findings about the inputs themselves (no session): the cross-session detectors run
    on a timeline that holds only the inputs' reports."""
    wanted = [d for d in options.detectors if d != ANALYSIS_ERROR]
    empty = NormalizedFrames(*(S.empty(schema) for schema in S.RAW_TABLES.values()))
    timeline = build_timeline(RawTables.from_frames(empty), inputs)
    found = run_detectors(timeline, only=wanted, config=options.config)
    return found.filter(pl.col("session").is_null() & (pl.col("detector") != ANALYSIS_ERROR))


def analyze_spark(
    paths: Sequence[str | Path],
    *,
    master: str,
    replica_header: str | None,
    client_header: str | None,
    cache: bool,
    cache_dir: str | None,
    only: Sequence[str] | None,
    disable: Sequence[str] | None,
    config: DetectorConfig | None,
    fail_on: Severity | None,
    otlp: OtlpOut | None = None,
) -> Report:
    """The `analyze` report of the Spark engine (an input that cannot be analyzed at all is an
    `UnreadableSparkInput`: the CLI says it in one line, as the default engine's); `otlp`:
    the OTLP document written too."""
    try:
        result = spark_findings(
            paths,
            master=master,
            replica_header=replica_header,
            client_header=client_header,
            cache=cache,
            cache_dir=cache_dir,
            only=only,
            disable=disable,
            config=config,
            otlp=otlp,
        )
    except IngestError as e:
        raise UnreadableSparkInput(str(e)) from e
    return Report(
        findings=result.findings,
        detectors=select_detectors(only=only, disable=disable),
        inputs=InputSummary.each(result.inputs),
        sessions=result.counts.get("sessions", 0),
        streams=result.counts.get("streams", 0),
        resumptions=result.counts.get("resumptions", 0),
        tool_calls=result.counts.get("tool_calls", 0),
        fail_on=fail_on,
        flow_inputs=result.flow_inputs,
    )
