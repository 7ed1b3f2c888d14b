"""Benchmark: the CPU cost of a first parse, per record, in one worker (no pool, no cache).

    .venv/bin/python bench/parse_bench.py CAPTURE [--repeat 3] [--parts 2] [--profile]

CAPTURE is a capture file or directory (e.g. one file of `bench/synth_capture.py` output). The
reader runs in this process as one worker would (`parts=1`), writing its Parquet parts to a
temporary folder, and the figure is process CPU time per record: on a shared machine it moves
far less than wall time. `--repeat N` runs N times and prints the median run and the spread;
`--profile` prints a cProfile instead (its figures are inflated by the profiler itself).
`--parts N` runs worker 0 of N (it reads and routes every line, parses its share): the per-record
figure is then that worker's CPU over the records it took, as in a pool of N.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections import Counter
from pathlib import Path

from analyzer.ingest import jsonl, lines
from analyzer.normalize import DEFAULT_BATCH_EVENTS


def _task(path: Path, out_dir: str, parts: int) -> jsonl._Task:
    files = lines.plan(lines.capture_files(path), Counter())
    return jsonl._Task(
        files=tuple(files),
        part=0,
        parts=parts,
        out_dir=out_dir,
        prefix="b",
        replica_header=None,
        client_header=None,
        batch_events=DEFAULT_BATCH_EVENTS,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    runs: list[tuple[float, float, int]] = []  # (cpu, wall, records)
    for _ in range(max(1, args.repeat)):
        with tempfile.TemporaryDirectory() as out_dir:
            task = _task(args.capture, out_dir, max(1, args.parts))
            if args.profile:
                profile = cProfile.Profile()
                profile.runcall(jsonl._scan, task)
                pstats.Stats(profile).sort_stats("tottime").print_stats(30)
                return
            wall, cpu = time.perf_counter(), time.process_time()
            result = jsonl._scan(task)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        runs.append((cpu, wall, result.records))
    runs.sort()
    cpu, wall, records = runs[len(runs) // 2]
    spread = (
        f"  (cpu {runs[0][0]:.2f}-{runs[-1][0]:.2f} s over {len(runs)} runs)"
        if len(runs) > 1
        else ""
    )
    print(
        f"{records:,} records  wall {wall:.2f} s  cpu {cpu:.2f} s  "
        f"{cpu / records * 1e6:.2f} µs/record (cpu)  {records / cpu:,.0f} records/s (cpu){spread}"
    )


if __name__ == "__main__":
    main()
