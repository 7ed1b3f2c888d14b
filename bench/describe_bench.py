"""Benchmark: what describing the bulk lane's SSE payloads costs, today and as Polars expressions.

    .venv/bin/python bench/describe_bench.py CAPTURE_FILE [--repeat 3] [--parse]

The bulk lane (`analyzer.ingest.bulk`) cuts a capture file's plain chunk records into events in
bulk, then describes every event's data in Python (`Normalizer.describe_data`, one call an
event). This script takes one file's event data the way the lane does and times, in turn:

- `today`: `Normalizer.describe_data` on the data column (a fresh normalizer each run: its memo
  starts empty, as in a first analysis);
- `polars`: a cost sketch of the same description by Polars expressions: a plainness screen
  (regex: floats, astral characters, keys read at most once, no `_meta` / listed tools), the
  JSON-RPC fields by `str.json_decode` with an explicit schema, and the raw SHA-256 hash of each
  payload (`data_hash`) in Python. It computes no canonical `payload_hash`: it is the cost of
  the lane when canonical hashes are only needed for a few candidates;
- `polars+canonical`: the same plus a canonical hash of every screened payload (orjson with
  sorted keys, SHA-256), the cost when `payload_hash` stays canonical for every payload.

With `--parse`, the same comparison inside a whole parse of the file in one worker (as
`bench/parse_bench.py` runs it), `describe_data` being in turn: `today`; the `polars` sketch
(its payloads as message rows, the ones it refuses described the general way); and `free`, a
description that costs nothing and gives no message row (a bound no faster description beats).

The sketch decides no edge case exactly (it is not the lane, only its cost). Figures are process
CPU seconds (and wall), medians of the runs taken in turn.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import polars as pl

from analyzer.ingest import bulk, jsonl, lines
from analyzer.normalize import DEFAULT_BATCH_EVENTS, Normalizer
from analyzer.normalize.describe import describe_general
from analyzer.normalize.flow import BULK_MESSAGE_SCHEMA, CARRIED, BulkDescription, general_frames

# Keys the description reads (or whose presence sends a payload the general way): each must
# occur at most once as a key, so that no duplicate makes orjson (last wins) and the sketch differ.
_KEYS = ("jsonrpc", "id", "method", "params", "result", "error", "progressToken", "progress",
         "protocolVersion", "isError", "_meta", "tools", "resultType", "inputRequests")  # fmt: skip
_REFUSED_KEYS = ("_meta", "tools", "resultType", "inputRequests")
# A float token follows ':', ',' or '[' (whitespace allowed in raw text); astral characters and
# escaped surrogates change the canonical key order.
_ODD = r"[\x{10000}-\x{10FFFF}]|\\u[dD][89a-fA-F]|[:,\[]\s*-?[0-9]+[.eE]|^\s*[^{\s]"
_FIELDS = pl.Struct(
    {
        "jsonrpc": pl.String,
        "id": pl.String,
        "method": pl.String,
        "params": pl.Struct({"progressToken": pl.String, "progress": pl.String}),
        "result": pl.Struct({"protocolVersion": pl.String, "isError": pl.String}),
    }
)


def event_data(path: Path) -> pl.Series:
    """The data of the events the bulk lane cuts out of the file's plain chunk records."""
    lines = [line for line in path.read_bytes().split(b"\n") if line]
    chunks, _ = bulk.read_chunks(lines)
    events, _ = bulk.plain_events(chunks)
    return events["data"]


def screened(data: pl.Series) -> pl.DataFrame:
    """The sketch: payloads that pass the screen, with their decoded fields and raw hash."""
    text = pl.col("data")
    keys = text.str.extract_all('"(?:' + "|".join(_KEYS) + r')"\s*:')
    refused = '"(?:' + "|".join(_REFUSED_KEYS) + r')"\s*:'
    frame = (
        data.to_frame("data")
        .with_row_index("event")
        .filter(text != "")
        .filter(
            ~text.str.contains(_ODD)
            & ~text.str.contains(refused)
            & (keys.list.len() == keys.list.n_unique())
        )
        .with_columns(
            text.str.json_decode(_FIELDS).alias("fields"),
            text.str.len_bytes().alias("data_bytes"),
            text.str.contains(r'"id"\s*:\s*"').alias("string_id"),
        )
        .unnest("fields")
    )
    raw_hashes = [hashlib.sha256(d.encode()).hexdigest()[:16] for d in frame["data"].to_list()]
    return frame.with_columns(pl.Series("data_hash", raw_hashes, pl.String))


def with_canonical(data: pl.Series) -> pl.DataFrame:
    """The sketch plus the canonical hash of every screened payload."""
    frame = screened(data)
    canonical = [
        hashlib.sha256(orjson.dumps(orjson.loads(d), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
        for d in frame["data"].to_list()
    ]
    return frame.with_columns(pl.Series("payload_hash", canonical, pl.String))


def today(data: pl.Series) -> object:
    """The lane today: the column as Python strings, described one by one."""
    return Normalizer().describe_data(data.to_list())


def _sketch_description(normalizer: Normalizer, datas: Sequence[str]) -> BulkDescription:
    """`describe_data` by the sketch: its payloads as message rows (raw hash as payload hash),
    the ones it refuses the general way."""
    plain = screened(pl.Series("data", datas, pl.String))
    method = pl.col("method")
    kind = (
        pl.when(method.is_not_null())
        .then(
            pl.when(pl.col("id").is_not_null())
            .then(pl.lit("request"))
            .otherwise(pl.lit("notification"))
        )
        .otherwise(pl.lit("response"))
    )
    result = pl.col("result")
    rows = plain.select(
        pl.col("event").cast(pl.Int64),
        pl.lit(None, pl.Int32).alias("member"),
        kind.cast(BULK_MESSAGE_SCHEMA["kind"]).alias("kind"),
        pl.when(pl.col("string_id"))
        .then(pl.lit('"') + pl.col("id") + pl.lit('"'))
        .otherwise(pl.col("id"))
        .alias("rpc_id"),
        "method",
        pl.lit(None, pl.String).alias("reason"),
        pl.col("data_hash").alias("payload_hash"),
        "data_hash",
        *(
            pl.lit(None, BULK_MESSAGE_SCHEMA[n]).alias(n)
            for n in ("tool_name", "arguments_hash", "mrtr_params")
        ),
        pl.when(result.is_not_null()).then(pl.lit(False)).alias("input_required"),
        (result.struct.field("isError") == "true").alias("is_error"),
        pl.lit(None, pl.Int64).alias("error_code"),
        result.struct.field("protocolVersion").alias("protocol_version"),
        pl.lit(None, pl.String).alias("client_info"),
        pl.lit(None, pl.String).alias("cancel_id"),
        pl.col("params").struct.field("progressToken").alias("progress_token"),
        pl.col("params").struct.field("progress").cast(pl.Float64, strict=False).alias("progress"),
        pl.col("data_bytes").cast(pl.Int64),
    )
    taken = set(rows["event"].to_list())
    other_at = [i for i, data in enumerate(datas) if data and i not in taken]
    general = general_frames(
        other_at, [describe_general(datas[i].encode(), datas[i]) for i in other_at]
    )
    carried = pl.concat(
        [
            rows.select(
                "event", "data_hash", "data_bytes", "payload_hash",
                pl.col("protocol_version").alias("result_version"),
            ),
            general.carried,
        ]
    ).sort("event")  # fmt: skip
    messages = pl.concat([rows.select(BULK_MESSAGE_SCHEMA.names()), general.messages]).sort(
        "event", maintain_order=True
    )
    return BulkDescription(carried, messages, general.tools)


def _free_description(normalizer: Normalizer, datas: Sequence[str]) -> BulkDescription:
    """`describe_data` at no cost: every payload carried, no message row."""
    at = [i for i, data in enumerate(datas) if data]
    carried = pl.DataFrame(
        {
            "event": at,
            "data_hash": ["0" * 16] * len(at),
            "data_bytes": [0] * len(at),
            "payload_hash": ["0" * 16] * len(at),
            "result_version": [None] * len(at),
        },
        schema=CARRIED,
    )
    general = general_frames([], [])
    return BulkDescription(carried, general.messages, general.tools)


def _parse(path: Path) -> None:
    """One worker's whole parse of the file (no pool, no cache), as `bench/parse_bench.py`."""
    with tempfile.TemporaryDirectory() as out_dir:
        files = lines.plan(lines.capture_files(path), Counter())
        task = jsonl._Task(
            files=tuple(files), part=0, parts=1, out_dir=out_dir, prefix="b",
            replica_header=None, client_header=None, batch_events=DEFAULT_BATCH_EVENTS,
        )  # fmt: skip
        jsonl._scan(task)


def _parse_phases(path: Path, repeat: int) -> None:
    variants: dict[str, Callable[[Normalizer, Sequence[str]], BulkDescription]] = {
        "today": Normalizer.describe_data,
        "polars": _sketch_description,
        "free": _free_description,
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    try:
        for _ in range(max(1, repeat)):
            for name, describe in variants.items():  # in turn
                Normalizer.describe_data = describe  # type: ignore[method-assign,assignment]
                runs[name].append(_timed(_parse, path))
    finally:
        Normalizer.describe_data = variants["today"]  # type: ignore[method-assign,assignment]
    for name, timed in runs.items():
        cpu, wall, spread = _median(timed)
        print(f"parse, describe_data {name:>6}: cpu {cpu:.2f} s  wall {wall:.2f} s  {spread}")


def _timed[T](run: Callable[[T], object], given: T) -> tuple[float, float]:
    """(cpu, wall) seconds of `run(given)`."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(given)
    return time.process_time() - cpu, time.perf_counter() - wall


def _median(timed: list[tuple[float, float]]) -> tuple[float, float, str]:
    """The median run's (cpu, wall) and the CPU spread over the runs, as printed."""
    timed = sorted(timed)
    cpu, wall = timed[len(timed) // 2]
    return cpu, wall, f"(cpu {timed[0][0]:.2f}-{timed[-1][0]:.2f} s over {len(timed)} runs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path, help="one capture file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parse", action="store_true", help="time whole parses instead")
    args = parser.parse_args()
    if args.parse:
        _parse_phases(args.capture, args.repeat)
        return
    data = event_data(args.capture)
    payloads = int((data != "").sum())
    phases: dict[str, Callable[[pl.Series], object]] = {
        "today": today,
        "polars": screened,
        "polars+canonical": with_canonical,
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in phases}
    for _ in range(max(1, args.repeat)):
        for name, run in phases.items():  # in turn: A, B, C, A, B, C...
            runs[name].append(_timed(run, data))
    print(f"{data.len():,} events, {payloads:,} payloads, {screened(data).height:,} screened plain")
    for name, timed in runs.items():
        cpu, wall, spread = _median(timed)
        print(
            f"{name:>17}: cpu {cpu:.2f} s  wall {wall:.2f} s  "
            f"{cpu / payloads * 1e6:.2f} µs/payload (cpu)  {spread}"
        )


if __name__ == "__main__":
    main()
