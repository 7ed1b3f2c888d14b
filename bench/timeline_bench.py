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
- cached:   read_timeline from the cache (its first run after the parse builds the timeline's
            collected frames and stores them, `analyzer.cache.frames`) + a per-session pass
            over sse_events and messages on the streaming engine, as a detector does (not
            collecting those record-level frames whole);
- analyze-built: read_inputs + build_timeline (the timeline built, as a first analysis after a
            parse does) + every detector + the report's counts (not the rendering of the report);
- analyze:  what a later `seamwatch analyze` of the same capture does: read_timeline (reads the
            stored timeline frames) + every detector + the report's counts;
- cli:      `seamwatch analyze CAPTURE --format json` of the cached capture, as a user runs it: a
            process of its own (interpreter start, imports, the report written to /dev/null);
- ceiling:  a raw Parquet scan of the cached events table (what reading can cost at least).

`cpu` is the phase's CPU time (all threads, and the parse's worker processes): on a loaded
machine it moves less than wall.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

PHASES = ("parse", "decode", "sketch", "cached", "analyze-built", "analyze", "cli", "ceiling")


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
    if name == "sketch":
        from analyzer.ingest.jsonl import capture_files

        schema = {
            "kind": pl.String,
            "flow": pl.String,
            "n": pl.Int64,
            "ts_ns": pl.Int64,
            "seq": pl.Int64,
            "data": pl.Struct({"text": pl.String}),
        }
        data = pl.col("data")
        events = (
            pl.scan_ndjson(capture_files(path), schema=schema, ignore_errors=True)
            .filter(pl.col("kind") == "chunk")
            .select(
                "flow",
                "n",
                "ts_ns",
                "seq",
                data.struct.field("text").str.strip_suffix("\n\n").str.split("\n\n").alias("block"),
            )
            .explode("block")
            .with_columns(
                pl.col("block").str.extract(r"(?m)^id: ?(.*)$").alias("event_id"),
                pl.col("block").str.extract(r"(?m)^data: ?(.*)$").alias("data"),
            )
            .select(
                "flow",
                "n",
                "ts_ns",
                "seq",
                "event_id",
                data.str.json_path_match("$.method").alias("method"),
                data.str.json_path_match("$.id").alias("rpc_id"),
                data.str.json_path_match("$.params.progressToken").alias("token"),
                data.hash().alias("raw_hash"),
            )
        )
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
    if name == "cli":
        report = ["analyze", str(path), "--format", "json", "--fail-on", "none"]
        command = [sys.executable, "-m", "analyzer.cli", *report, "--out", os.devnull]
        subprocess.run(command, check=True)
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
    if name == "cli":  # the analysis ran in the child
        own, children = children, 0.0
    return {
        "events": events,
        "seconds": wall,
        "cpu_seconds": cpu,
        "rss_mb": own,
        "worker_rss_mb": children,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--phase", choices=PHASES)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, args.capture)))
        return
    # The settings `seamwatch` itself runs with (`analyzer.memory`), where none are set.
    from analyzer.memory import analysis_defaults

    analysis_defaults()
    for phase in PHASES:
        out = subprocess.run(
            [sys.executable, __file__, str(args.capture), "--phase", phase],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        rate = r["events"] / r["seconds"]
        print(
            f"{phase:13s} {r['events']:>10,.0f} events  {r['seconds']:7.2f} s "
            f"(cpu {r['cpu_seconds']:7.2f} s)  "
            f"{rate:>12,.0f} events/s  peak RSS {r['rss_mb']:6.0f} MB"
            f" (workers {r['worker_rss_mb']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
