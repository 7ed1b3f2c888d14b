"""Benchmark: first parse of a capture, then the timeline from the Parquet cache.

    .venv/bin/python bench/synth_capture.py synth1m --events 1000000
    .venv/bin/python bench/timeline_bench.py synth1m

Each phase runs in its own process (so peak RSS is the phase's own) and prints SSE events/s:

- parse:    read_inputs with the cache removed first (JSON lines → Parquet, both cores);
- decode:   JSON decoding alone, the floor of a first parse: every line of the capture files and
            every `data:` line of their chunks' SSE text decoded with orjson, one process a
            core, nothing checked, kept or written (base64 chunks, which synthetic captures do
            not have, are not decoded nor their events counted);
- sketch:   the Polars-only design the parse is measured against: chunk records scanned with an
            explicit schema, their SSE text split into events, `id` and `data` taken, each data's
            method, id and progress token read by JSON path and its bytes hashed, written to
            Parquet; no damage checks, no per-record lane, no canonical hash, no other table;
- sketch-read, sketch-split, sketch-fields: the sketch's first stages alone, written to
            Parquet: the chunk records' text read (it counts records, not events); cut into SSE
            blocks; each block's `id` and `data` taken and the data hashed (what any parse of
            the events must do at least, before reading a JSON-RPC field);
- cached:   read_timeline from the cache (its first run after the parse builds the timeline's
            collected frames and stores them, `analyzer.cache.frames`) + a per-session pass
            over sse_events and messages on the streaming engine, as a detector does (not
            collecting those record-level frames whole);
- analyze-built: read_inputs + build_timeline (the timeline built, as a first analysis after a
            parse does) + every detector + the report's counts (not the rendering of the report);
- analyze:  what a later `seamwatch analyze` of the same capture does: read_timeline (reads the
            stored timeline frames) + every detector + the report's counts;
- first:    `seamwatch analyze CAPTURE --no-cache --format json`, as a user runs a first analysis:
            a process of its own (interpreter start, imports, the parse, the timeline, every
            detector, the report written to /dev/null): the figure #27's target compares with
            `decode` (at most 1.5x);
- cli:      `seamwatch analyze CAPTURE --format json` of the cached capture, as a user runs it: a
            process of its own (interpreter start, imports, the report written to /dev/null);
- ceiling:  a raw Parquet scan of the cached events table (what reading can cost at least).

`cpu` is the phase's CPU time (all threads, and the parse's worker processes): on a loaded
machine it moves less than wall.

    .venv/bin/python bench/timeline_bench.py synth1m --phases decode,first --repeat 3

runs the phases named, in turn, `--repeat` times, and prints each phase's medians and its ratio
to `decode` (the median of the ratios of the runs taken side by side, wall and cpu).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import polars as pl

PHASES = (
    "parse", "decode", "first", "sketch-read", "sketch-split", "sketch-fields", "sketch", "cached",
    "analyze-built", "analyze", "cli", "ceiling",
)  # fmt: skip


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the parse's workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cached_events(path: Path) -> pl.LazyFrame:
    """A scan of the cached events table of a capture analyzed before."""
    import polars as pl

    from analyzer.ingest import read_inputs

    directory = read_inputs([path]).directories[0]
    assert directory is not None
    return pl.scan_parquet(sorted(directory.glob("events-*.parquet")))


def _text_events(path: Path) -> int:
    """The SSE events (blocks) of the capture's chunk texts, as `_decode` counts them."""
    import polars as pl

    count = pl.col("text").str.count_matches("\n\n", literal=True).sum()
    return int(_sketch(path, "sketch-read").select(count).collect().item())


def _decode(files: list[Path]) -> int:
    """The `decode` phase's work in one process: the SSE events (blocks) of the chunks read."""
    import orjson

    events = 0
    for file in files:
        with file.open("rb") as fh:
            for line in fh:
                record = orjson.loads(line)
                text = record["data"].get("text") if record.get("kind") == "chunk" else None
                if not text:
                    continue
                events += text.count("\n\n")
                for field in text.split("\n"):
                    if field.startswith("data:") and len(field) > 5:
                        with contextlib.suppress(orjson.JSONDecodeError):
                            orjson.loads(field[5:])
    return events


# The Polars-only sketch, stage by stage: each does what the one before it does, and more.
_SKETCHES: Final = ("sketch-read", "sketch-split", "sketch-fields", "sketch")


def _sketch(path: Path, name: str) -> pl.LazyFrame:
    """Phase `name`'s sketch: the chunk records (`sketch-read`: their text), cut into SSE
    blocks (`sketch-split`), each block's id and data with a raw hash of the data
    (`sketch-fields`), and each data's method, id and progress token (`sketch`)."""
    import polars as pl

    from analyzer.ingest.jsonl import capture_files

    schema = pl.Schema(
        {
            "kind": pl.String(),
            "flow": pl.String(),
            "n": pl.Int64(),
            "ts_ns": pl.Int64(),
            "seq": pl.Int64(),
            "data": pl.Struct({"text": pl.String()}),
        }
    )
    text = pl.col("data").struct.field("text")
    chunks = (
        pl.scan_ndjson(capture_files(path), schema=schema, ignore_errors=True)
        .filter(pl.col("kind") == "chunk")
        .select("flow", "n", "ts_ns", "seq", text.alias("text"))
    )
    if name == "sketch-read":
        return chunks
    blocks = chunks.select(
        "flow",
        "n",
        "ts_ns",
        "seq",
        pl.col("text").str.strip_suffix("\n\n").str.split("\n\n").alias("block"),
    ).explode("block")
    if name == "sketch-split":
        return blocks
    data = pl.col("data")
    fields = blocks.with_columns(
        pl.col("block").str.extract(r"(?m)^id: ?(.*)$").alias("event_id"),
        pl.col("block").str.extract(r"(?m)^data: ?(.*)$").alias("data"),
    ).select("flow", "n", "ts_ns", "seq", "event_id", "data", data.hash().alias("raw_hash"))
    if name == "sketch-fields":
        return fields.drop("data")
    return fields.select(
        "flow",
        "n",
        "ts_ns",
        "seq",
        "event_id",
        data.str.json_path_match("$.method").alias("method"),
        data.str.json_path_match("$.id").alias("rpc_id"),
        data.str.json_path_match("$.params.progressToken").alias("token"),
        "raw_hash",
    )


def _run(name: str, path: Path, spill: Path) -> Callable[[], int]:
    """Run phase `name`; return what counts its SSE events (a count the phase did not make
    itself is made when called, after the clock has stopped)."""
    import polars as pl

    from analyzer.analysis import raw_tables, read_timeline
    from analyzer.ingest import read_inputs
    from analyzer.timeline import build_timeline

    if name == "decode":
        from concurrent.futures import ProcessPoolExecutor

        from analyzer.ingest.jsonl import capture_files

        workers = os.cpu_count() or 1
        files = capture_files(path)
        with ProcessPoolExecutor(workers) as pool:
            decoded = sum(pool.map(_decode, [files[i::workers] for i in range(workers)]))
        return lambda: decoded
    if name in _SKETCHES:
        events = _sketch(path, name)
        events.sink_parquet(spill / "sketch.parquet")
        return lambda: pl.scan_parquet(spill / "sketch.parquet").select(pl.len()).collect().item()
    if name == "parse":
        ingested = read_inputs([path])
        events = ingested.scan("events").select(pl.len()).collect().item()
        return lambda: events
    if name == "cached":
        timeline = read_timeline([path], spill_dir=spill)
        assert timeline.inputs[0].cached, "run the parse phase first"
        per_session = [
            timeline.sse_events.group_by("session_id", "stream_id").agg(
                pl.len(), pl.col("ts").max(), pl.col("stream_pos").max()
            ),
            timeline.messages.group_by("session_id", "kind").agg(pl.len()),
        ]
        counted = pl.collect_all(per_session, engine="streaming")
        return lambda: int(counted[0]["len"].sum())
    if name in ("analyze", "analyze-built"):
        from analyzer.detectors import DETECTORS, run_detectors
        from analyzer.report.run import build_report

        if name == "analyze":
            timeline = read_timeline([path], spill_dir=spill)
        else:
            ingested = read_inputs([path])
            raw = raw_tables(ingested)
            timeline = build_timeline(raw, ingested.inputs, spill_dir=spill)
        assert timeline.inputs[0].cached, "run the parse phase first"
        findings = run_detectors(timeline)
        build_report(timeline, findings, DETECTORS, fail_on=None)
        # The analysis never counts its events (a join of every event with its flow: 0.6 s at
        # 10M events): counted after the clock stops.
        return lambda: timeline.sse_events.select(pl.len()).collect().item()
    if name in ("cli", "first"):
        report = ["analyze", str(path), "--format", "json", "--fail-on", "none"]
        if name == "first":
            report.append("--no-cache")
        command = [sys.executable, "-m", "analyzer.cli", *report, "--out", os.devnull]
        subprocess.run(command, check=True)
        if name == "first":  # no cache to count from: counted as `decode` counts
            return lambda: _text_events(path)
        return lambda: _cached_events(path).select(pl.len()).collect().item()
    scan = _cached_events(path)  # ceiling
    per_flow = scan.group_by("flow_id").agg(pl.len(), pl.col("ts").max()).collect()
    return lambda: int(per_flow["len"].sum())


def _phase(name: str, path: Path) -> dict[str, float]:
    # Where large frames wait, as in `seamwatch analyze`; removed at the end of the phase.
    spill = Path(tempfile.mkdtemp(prefix="seamwatch-bench-"))
    if name == "parse":  # a first parse: no cache
        shutil.rmtree(path / ".seamwatch-cache", ignore_errors=True)
    start, cpu = time.perf_counter(), _cpu()
    count = _run(name, path, spill)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    events = count()
    shutil.rmtree(spill, ignore_errors=True)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if name in ("cli", "first"):  # the analysis ran in the child (the largest process)
        own, children = children, 0.0
    return {
        "events": events,
        "seconds": wall,
        "cpu_seconds": cpu,
        "rss_mb": own,
        "worker_rss_mb": children,
    }


def _line(phase: str, r: dict[str, float]) -> str:
    rate = r["events"] / r["seconds"]
    return (
        f"{phase:13s} {r['events']:>10,.0f} events  {r['seconds']:7.2f} s "
        f"(cpu {r['cpu_seconds']:7.2f} s)  "
        f"{rate:>12,.0f} events/s  peak RSS {r['rss_mb']:6.0f} MB"
        f" (workers {r['worker_rss_mb']:.0f} MB)"
    )


def _ratios(runs: list[dict[str, dict[str, float]]]) -> None:
    """Each phase's medians over the rounds, and its ratio to `decode` taken round by round."""
    print("medians over", len(runs), "rounds (ratio: to decode in the same round, median)")
    for phase in runs[0]:
        wall = statistics.median(r[phase]["seconds"] for r in runs)
        cpu = statistics.median(r[phase]["cpu_seconds"] for r in runs)
        line = f"{phase:13s} {wall:7.2f} s (cpu {cpu:7.2f} s)"
        if "decode" in runs[0] and phase != "decode":
            by_wall = statistics.median(r[phase]["seconds"] / r["decode"]["seconds"] for r in runs)
            by_cpu = statistics.median(
                r[phase]["cpu_seconds"] / r["decode"]["cpu_seconds"] for r in runs
            )
            line += f"  {by_wall:5.2f}x decode (cpu {by_cpu:5.2f}x)"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--phase", choices=PHASES)
    parser.add_argument("--phases", help="comma-separated phases to run in turn (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the phases, in turn")
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, args.capture)))
        return
    phases = args.phases.split(",") if args.phases else list(PHASES)
    unknown = sorted(set(phases).difference(PHASES))
    if unknown:
        parser.error(f"unknown phase(s): {', '.join(unknown)} (known: {', '.join(PHASES)})")
    # The settings `seamwatch` itself runs with for this capture (`analyzer.memory`), where
    # none are set.
    from analyzer.memory import analysis_defaults, inputs_bytes

    analysis_defaults(inputs_bytes([str(args.capture)]))
    runs: list[dict[str, dict[str, float]]] = []
    for _ in range(max(args.repeat, 1)):
        runs.append({})
        for phase in phases:
            out = subprocess.run(
                [sys.executable, __file__, str(args.capture), "--phase", phase],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[-1][phase] = json.loads(out.strip().splitlines()[-1])
            print(_line(phase, runs[-1][phase]), flush=True)
    if len(runs) > 1 or "decode" in phases:
        _ratios(runs)


if __name__ == "__main__":
    main()
