"""What the Spark engine's executors run: the existing ingest, timeline and detectors, over
Arrow batches (`analyzer.spark.engine` plans the jobs; nothing here imports pyspark).

Rows cross Spark as opaque Arrow IPC blobs of the normalized tables, each with the columns
Spark shuffles and joins on beside it: the flows' `group` (see `flow_groups`), the input index,
the table's name. Spark never needs the tables' own column types.
"""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer import schema as S
from analyzer.detectors import run_detectors, select_detectors
from analyzer.ingest import Ingested, InputReport, read_inputs
from analyzer.scratch import scratch_prefix
from analyzer.spark.links import link_rows
from analyzer.timeline import RawTables, Timeline, build_timeline
from analyzer.timeline.keys import ORIGIN, key_flows

__all__ = [
    "ANALYSIS_OUT",
    "ANALYSIS_OUT_DDL",
    "RECORDS",
    "RECORDS_DDL",
    "RUN_ORIGINS_DDL",
    "Options",
    "Rename",
    "analyze_bucket",
    "analyze_groups",
    "flow_groups",
    "ingest_inputs",
    "ingest_one",
    "one_bucket",
    "pack",
    "raw_tables",
    "run_origins",
    "table_records",
    "unpack",
]

#: The ingest stage's rows: one blob per (input, flow group, table).
RECORDS: Final = pa.schema(
    [
        ("group", pa.string()),
        ("input", pa.int32()),
        ("table", pa.string()),
        ("blob", pa.binary()),
    ]
)

#: What an analysis task yields: `what` says which columns hold what.
#: finding: session, detector, input (of its first flow, SARIF locations), blob (one finding);
#: link: key, session, wants, via, ts (`analyzer.spark.links`); session: key (its group), session;
#: count: key (sessions, streams, resumptions, tool_calls), n; duplicate_flow: input, n;
#: report: blob (an ingested input's report, JSON).
ANALYSIS_OUT: Final = pa.schema(
    [
        ("what", pa.string()),
        ("key", pa.string()),
        ("session", pa.string()),
        ("detector", pa.string()),
        ("wants", pa.bool_()),
        ("via", pa.string()),
        ("input", pa.int32()),
        ("n", pa.int64()),
        ("ts", pa.int64()),
        ("blob", pa.binary()),
    ]
)

#: The two schemas above as Spark DDL (what `mapInArrow` and `applyInArrow` are given).
RECORDS_DDL: Final = "group string, input int, table string, blob binary"
ANALYSIS_OUT_DDL: Final = (
    "what string, key string, session string, detector string, wants boolean, via string, "
    "input int, n long, ts long, blob binary"
)

_COUNTED: Final = ("sessions", "streams", "resumptions", "tool_calls")
_TABLES: Final = ("flows", "events", "messages", "tools", "payloads")


#: What an input read from a scratch copy calls itself in its report.
Rename = Callable[[InputReport], InputReport]


@dataclass(frozen=True)
class Options:
    """The analysis options every task needs (picklable: shipped to the executors)."""

    replica_header: str | None = None
    client_header: str | None = None
    cache: bool = True
    detectors: tuple[str, ...] = ()  # the ids to run (already selected by the driver)
    config: Mapping[str, Mapping[str, object]] | None = None
    # Whether some run reaches several origins (session keys then end with `@origin`): judged
    # over every input's flows by the driver, as a bucket sees only its own.
    several_origins: bool | None = None


def pack(frame: pl.DataFrame) -> bytes:
    """A frame as Arrow IPC stream bytes."""
    sink = io.BytesIO()
    frame.write_ipc_stream(sink, compression="lz4")
    return sink.getvalue()


def unpack(blobs: Iterable[bytes], schema: pl.Schema) -> pl.DataFrame:
    """The frames `pack` wrote, concatenated (empty frames of `schema` when there are none)."""
    frames = [pl.read_ipc_stream(io.BytesIO(blob)) for blob in blobs]
    if not frames:
        return S.empty(schema)
    return pl.concat(frames, how="vertical")


def flow_groups(flows: pl.LazyFrame) -> pl.LazyFrame:
    """`flow_id, group` of RAW_FLOWS rows: a group holds every flow of each of its sessions.

    A `mcp:` or `legacy:` key is the flow's own (a header, a query value); an `anon:` or
    `client:` key depends on the other flows of the same client address (`key_flows`), so all
    of those flows share one group per address and kind. The kind itself is the flow's own, so
    groups computed per input agree across inputs. Keys without their origin: whether one
    is added is judged over every input, and a group holds a key's sessions at every origin.
    """
    own = pl.col("session_kind").is_in(["mcp", "legacy"])
    address = pl.concat_str(
        pl.col("session_kind").cast(pl.String), pl.lit("@"), pl.col("client_ip").fill_null("?")
    )
    return flows.pipe(key_flows, False).select(
        "flow_id", pl.when(own).then(pl.col("session_id")).otherwise(address).alias("group")
    )


def ingest_inputs(batches: Iterator[pa.RecordBatch], options: Options) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over rows `input, path`: each input read (parsed, or from its Parquet cache
    beside it, which the parse fills) and its tables yielded as `RECORDS` blobs, one per flow
    group and table, then its report (a `RECORDS` row of table `report`)."""
    for batch in batches:
        for row in batch.to_pylist():
            yield from ingest_one(int(row["input"]), str(row["path"]), options)


def ingest_one(
    index: int, path: str, options: Options, rename: Rename | None = None
) -> Iterator[pa.RecordBatch]:
    """One input read (`ingest_inputs`); `rename` gives its report the names it was listed
    under (an input read from a scratch copy)."""
    ingested = read_inputs(
        [path],
        replica_header=options.replica_header,
        client_header=options.client_header,
        cache=options.cache,
        workers=1,  # one task a core: Spark runs the inputs side by side
    )
    yield from table_records(ingested, index)
    report = ingested.inputs[0] if rename is None else rename(ingested.inputs[0])
    blob = json.dumps(asdict(report)).encode()
    yield pa.RecordBatch.from_pylist(
        [{"group": "", "input": index, "table": "report", "blob": blob}], schema=RECORDS
    )


def table_records(ingested: Ingested, index: int) -> Iterator[pa.RecordBatch]:
    """The normalized tables `ingested` holds as `RECORDS` blobs of input `index`, one per flow
    group and table (a payload goes to every group whose rows name it)."""
    flows = ingested.scan("flows").with_columns(pl.lit(index, pl.Int32).alias("input"))
    groups = flows.pipe(flow_groups).collect()
    hashes: list[pl.DataFrame] = []
    for table in _TABLES:
        if table == "payloads":
            # A payload goes to every group whose rows name it.
            frame = (
                ingested.scan("payloads")
                .join(pl.concat(hashes).unique().lazy(), on="data_hash")
                .collect()
            )
        else:
            scan = flows if table == "flows" else ingested.scan(table)
            frame = scan.join(groups.lazy(), on="flow_id", how="inner").collect()
            hashes.extend(_named_payloads(table, frame))
        yield _records(frame, index, table)


def _named_payloads(table: str, frame: pl.DataFrame) -> list[pl.DataFrame]:
    """`data_hash, group` of the payloads a table's rows name."""
    columns = {
        "flows": ("request_body_hash", "response_body_hash"),
        "events": ("data_hash",),
        "messages": ("data_hash",),
    }.get(table, ())
    return [
        frame.select(pl.col(c).alias("data_hash"), "group").drop_nulls("data_hash") for c in columns
    ]


def _records(frame: pl.DataFrame, index: int, table: str) -> pa.RecordBatch:
    parts = frame.partition_by("group", as_dict=True, include_key=False)
    rows = [
        {"group": str(key[0]), "input": index, "table": table, "blob": pack(part)}
        for key, part in parts.items()
    ]
    return pa.RecordBatch.from_pylist(rows, schema=RECORDS)


RUN_ORIGINS_DDL: Final = "run_id string, origin string"


def run_origins(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over `RECORDS` rows of flows (`blob` only): each run's origins, once each
    a batch (the driver judges `several_origins` from them)."""
    for batch in batches:
        flows = unpack(batch.column("blob").to_pylist(), S.RAW_TABLES["flows"])
        yield from (flows.select("run_id", ORIGIN.alias("origin")).unique().to_arrow().to_batches())


def raw_tables(records: pa.Table) -> tuple[RawTables, pl.DataFrame]:
    """The normalized tables of some groups' `RECORDS` rows, and per input how many of its flows
    an earlier input held too (`input, n`). A flow two inputs both hold is kept from the first
    one, as `analyzer.ingest.read_inputs` keeps it."""
    rows = pl.from_arrow(records)
    assert isinstance(rows, pl.DataFrame)
    tables = {
        name: unpack(rows.filter(pl.col("table") == name)["blob"].to_list(), schema)
        for name, schema in S.RAW_TABLES.items()
    }
    flows = tables["flows"]
    if "input" not in flows.columns:
        flows = flows.with_columns(pl.lit(None, pl.Int32).alias("input"))
    first = pl.col("input").min().over("flow_id")
    repeated = flows.filter(pl.col("input") > first).select("flow_id", "input").unique()
    dropped = repeated.group_by("input").agg(pl.len().cast(pl.Int64).alias("n"))
    later = repeated.select("flow_id").unique()
    raw = RawTables(
        flows=flows.filter(pl.col("input") == first).lazy(),
        # The later copies' records: left out by flow id wherever they came from (their rows are
        # the same flow's, read twice).
        events=_first_copies(tables["events"], rows, "events", later),
        messages=_first_copies(tables["messages"], rows, "messages", later),
        tools=_first_copies(tables["tools"], rows, "tools", later),
        payloads=tables["payloads"].unique("data_hash", keep="any").lazy(),
    )
    return raw, dropped


def _first_copies(
    frame: pl.DataFrame, rows: pl.DataFrame, table: str, later: pl.DataFrame
) -> pl.LazyFrame:
    """A table's rows without those of flows read twice, but for the first input's copy."""
    if later.is_empty():
        return frame.lazy()
    kept = []
    first_input = rows.filter(pl.col("table") == "flows").select("input").min().item()
    for input_rows in rows.filter(pl.col("table") == table).partition_by("input"):
        part = unpack(input_rows["blob"].to_list(), S.RAW_TABLES[table])
        index = input_rows["input"][0]
        if index != first_input:
            part = part.join(later, on="flow_id", how="anti")
        kept.append(part)
    return pl.concat(kept).lazy() if kept else frame.lazy()


def analyze_groups(
    records: pa.Table, options: Options, *, links: bool, inputs: Sequence[InputReport] = ()
) -> pa.Table:
    """`applyInArrow` over the `RECORDS` rows of whole sessions: their timeline built and the
    detectors `options.detectors` run on it; yields `ANALYSIS_OUT` rows. With `links`, also the
    rows the driver needs to find the sessions cross-session judgements relate (and the
    summary counts, the sessions of each group, the repeated flows)."""
    raw, dropped = raw_tables(records)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark")) as spill:
        timeline = build_timeline(
            raw, inputs, spill_dir=Path(spill), several_origins=options.several_origins
        )
        out = []
        if options.detectors:
            findings = run_detectors(timeline, only=options.detectors, config=options.config)
            out.append(_finding_rows(timeline, findings))
        if links:
            out.append(_link_rows(timeline, raw.tools))
            out.append(_session_rows(timeline, raw.flows))
            out.append(_count_rows(timeline, dropped))
        kept = [t for t in out if t.num_rows]
        return pa.concat_tables(kept) if kept else ANALYSIS_OUT.empty_table()


def analyze_bucket(batches: Iterator[pa.RecordBatch], options: Options) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over a bucketed scan of the cache (`analyzer.spark.cache`): the partition
    is one bucket, whole sessions, analyzed as `analyze_groups` with links."""
    return one_bucket(batches, lambda table: analyze_groups(table, options, links=True))


def one_bucket(
    batches: Iterator[pa.RecordBatch], analyze: Callable[[pa.Table], pa.Table]
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over a bucketed scan of the cache: `analyze` given the partition's rows,
    one bucket, whole sessions. Rows of two buckets (a scan that split the table by file)
    would cut sessions apart: an error, not a different result."""
    held = [batch for batch in batches if batch.num_rows]
    if not held:
        return
    table = pa.Table.from_batches(held)
    if len(pc.unique(table["bucket"])) != 1:
        raise ValueError("a bucket's task got rows of two buckets (not a bucketed scan)")
    yield from analyze(table).to_batches()


def _table(rows: list[dict[str, object]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ANALYSIS_OUT)


def _finding_rows(timeline: Timeline, findings: pl.DataFrame) -> pa.Table:
    first = findings["flow_ids"].list.first().drop_nulls().unique()
    inputs = dict(
        timeline.exchanges.select("flow_id", "input")
        .filter(pl.col("flow_id").is_in(first.implode()))
        .unique("flow_id", keep="first")
        .collect()
        .iter_rows()
    )
    rows: list[dict[str, object]] = []
    for i in range(findings.height):
        one = findings.slice(i, 1)
        flows = one["flow_ids"][0]
        rows.append(
            {
                "what": "finding",
                "session": one["session"][0],
                "detector": one["detector"][0],
                "input": inputs.get(flows[0]) if len(flows) else None,
                "blob": pack(one),
            }
        )
    return _table(rows)


def _link_rows(timeline: Timeline, tools: pl.LazyFrame) -> pa.Table:
    frame = link_rows(timeline, tools).collect()
    return _table(
        [
            {"what": "link", "key": key, "session": session, "wants": wants, "via": via, "ts": ts}
            for key, session, wants, via, ts in frame.iter_rows()
        ]
    )


def _session_rows(timeline: Timeline, flows: pl.LazyFrame) -> pa.Table:
    """Each session's group (one per session: `flow_groups`)."""
    groups = (
        timeline.exchanges.select("flow_id", "session_id")
        .join(flows.pipe(flow_groups), on="flow_id")
        .unique("session_id")
        .collect()
    )
    return _table(
        [
            {"what": "session", "key": group, "session": session}
            for session, group in groups.select("session_id", "group").iter_rows()
        ]
    )


def _count_rows(timeline: Timeline, dropped: pl.DataFrame) -> pa.Table:
    heights = pl.collect_all([getattr(timeline, name).select(pl.len()) for name in _COUNTED])
    rows: list[dict[str, object]] = [
        {"what": "count", "key": name, "n": int(h.item())}
        for name, h in zip(
            ("sessions", "streams", "resumptions", "tool_calls"), heights, strict=True
        )
    ]
    rows += [
        {"what": "duplicate_flow", "input": int(i), "n": int(n)}
        for i, n in dropped.select("input", "n").iter_rows()
    ]
    return _table(rows)


def report_of(blob: bytes) -> InputReport:
    """An input's report from its `ingest_inputs` row."""
    fields = json.loads(blob)
    fields["warnings"] = tuple(fields["warnings"])
    fields["files"] = tuple(fields["files"])
    return InputReport(**fields)


def chosen_ids(only: Iterable[str] | None, disable: Iterable[str] | None) -> tuple[str, ...]:
    """The detector ids a run selects (`select_detectors`: its errors are the driver's)."""
    return tuple(det.id for det in select_detectors(only=only, disable=disable))
