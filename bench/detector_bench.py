"""Benchmark: each detector's time on a capture's timeline, read from the Parquet cache.

    .venv/bin/python bench/detector_bench.py CAPTURE [--rounds 3] [--only ID,ID]

Loads the timeline as `seamwatch analyze` does, through the cache (analyze the capture once
before, so that the timeline's frames are stored and the load reads them), then runs each
detector alone as the analysis runs it (`run_detectors`), `--rounds` times, one round after the
other so that every detector meets the same machine. Prints the load time, each detector's
median seconds (slowest first) with its spread, their sum and the process's peak RSS: where an
analysis from the cache spends its time (`timeline_bench.py --phase analyze` times the whole).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from analyzer.analysis import read_timeline
from analyzer.detectors import ANALYSIS_ERROR, DETECTORS, run_detectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="detector ids, comma-separated")
    args = parser.parse_args()
    wanted = {d for d in args.only.split(",") if d}
    unknown = wanted - {d.id for d in DETECTORS}
    if unknown:
        parser.error(f"--only: no detector {', '.join(sorted(unknown))}")
    # `analysis-error` reports the others' failures: it runs with every one of them.
    chosen = [d for d in DETECTORS if d.id != ANALYSIS_ERROR and (not wanted or d.id in wanted)]
    times: dict[str, list[float]] = {d.id: [] for d in chosen}
    with tempfile.TemporaryDirectory(prefix="seamwatch-bench-") as spill:
        start = time.perf_counter()
        timeline = read_timeline([args.capture], spill_dir=Path(spill))
        loaded = time.perf_counter() - start
        for _ in range(max(1, args.rounds)):
            for det in chosen:
                start = time.perf_counter()
                run_detectors(timeline, detectors=(det,))
                times[det.id].append(time.perf_counter() - start)
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    print(f"{'load (from the cache)':28s} {loaded:7.3f} s")
    for name in sorted(medians, key=lambda n: -medians[n]):
        runs = times[name]
        print(f"{name:28s} {medians[name]:7.3f} s  ({min(runs):.3f}-{max(runs):.3f})")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'detectors (sum of medians)':28s} {sum(medians.values()):7.3f} s")
    print(
        f"peak RSS {peak_mb:.0f} MB over {len(times)} detector(s), {max(1, args.rounds)} round(s)"
    )


if __name__ == "__main__":
    main()
