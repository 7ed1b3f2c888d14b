"""Benchmark: `seamwatch analyze` on the default engine and on Spark, side by side in one run.

    .venv/bin/python bench/spark_bench.py WORK --events 1000000 [--events 3000000]
        [--inputs 2] [--master local[2]] [--rounds 1]

For each size, WORK/<events>/ gets `--inputs` synthetic captures (`bench/synth_capture.py`, one
per replica, the events split between them; kept for later runs). Then, each a process of its
own, on the same inputs:

- polars-parse: the default engine with the Parquet cache removed first (the first parse);
- polars:       the default engine again (its cache and stored timeline frames read);
- spark-parse:  `--engine spark --master M` with every cache removed first: the ingest stage
                parses each input (a capture folder a task a file, `analyzer/spark/files.py`)
                and writes the Spark cache, bucketed by session-key hash; the second stage
                reads it a bucket a task;
- spark:        the same again: the Spark cache read, no parse (the timeline is built anew per
                bucket).

Each line: wall time, peak RSS of the driver process, of the JVM (Spark's driver and, in local
mode, its executors), of the Python workers (summed over those alive at once), and for Spark the
bytes each stage shuffled (written, read) from its event log. Figures vary by a third from day
to day on a shared machine: compare lines of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEAMWATCH = [sys.executable, "-m", "analyzer.cli"]
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Peaks:
    """Peak RSS (bytes) of a process tree, by role: driver, jvm, python workers."""

    driver: int = 0
    jvm: int = 0
    workers: int = 0
    seen: set[int] = field(default_factory=set)


def _tree(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (command name, RSS bytes) of `root` and its descendants (from /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    info: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        pid = int(entry.name)
        children[ppid].append(pid)
        info[pid] = (name, int(statm[1]) * _PAGE)
    out: dict[int, tuple[str, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in info:
            out[pid] = info[pid]
            todo.extend(children.get(pid, ()))
    return out


def _watch(pid: int, peaks: Peaks, done: threading.Event) -> None:
    while not done.is_set():
        tree = _tree(pid)
        jvm = sum(rss for p, (name, rss) in tree.items() if name == "java")
        workers = sum(rss for p, (name, rss) in tree.items() if p != pid and name != "java")
        peaks.driver = max(peaks.driver, tree.get(pid, ("", 0))[1])
        peaks.jvm = max(peaks.jvm, jvm)
        peaks.workers = max(peaks.workers, workers)
        done.wait(0.2)


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, Peaks]:
    """Run `argv`; its wall time and peak RSS by role."""
    peaks = Peaks()
    done = threading.Event()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watcher = threading.Thread(target=_watch, args=(proc.pid, peaks, done))
    watcher.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    watcher.join()
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return wall, peaks


def shuffles(log_dir: Path) -> list[tuple[int, str, int, int, int, float, int]]:
    """Per stage of the Spark event log in `log_dir`: id, name, tasks, shuffle bytes written
    and read, and its largest task: the longest one's seconds, the most shuffle bytes one read
    (one task holding a stage's data shows here, not in the totals)."""
    stages: dict[int, list[object]] = {}
    for path in sorted(p for p in log_dir.rglob("*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                row = stages.setdefault(info["Stage ID"], [info["Stage Name"], 0, 0, 0, 0.0, 0])
                row[0] = info["Stage Name"]
            elif kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                task = event.get("Task Info") or {}
                row = stages.setdefault(event["Stage ID"], ["?", 0, 0, 0, 0.0, 0])
                row[1] = int(row[1]) + 1  # type: ignore[call-overload]
                written = metrics.get("Shuffle Write Metrics", {}).get("Shuffle Bytes Written", 0)
                read = metrics.get("Shuffle Read Metrics", {})
                got = read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)
                row[2] = int(row[2]) + written  # type: ignore[call-overload]
                row[3] = int(row[3]) + got  # type: ignore[call-overload]
                took = (task.get("Finish Time", 0) - task.get("Launch Time", 0)) / 1000
                row[4] = max(float(row[4]), took)  # type: ignore[arg-type]
                row[5] = max(int(row[5]), got)  # type: ignore[call-overload]
    return [
        (sid, str(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]), int(row[5]))  # type: ignore[call-overload, arg-type]
        for sid, row in sorted(stages.items())
    ]


def inputs_of(work: Path, events: int, count: int) -> list[Path]:
    """`count` synthetic captures of `events` events in all (written once)."""
    folder = work / str(events)
    paths = [folder / f"replica-{i}" for i in range(count)]
    for i, path in enumerate(paths):
        if not path.is_dir():
            subprocess.run(
                [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(path),
                 "--events", str(events // count), "--seed", str(i + 1)],
                check=True,
            )  # fmt: skip
    return paths


def _line(label: str, events: int, wall: float, peaks: Peaks) -> str:
    mib = 1 << 20
    return (
        f"{label:13} {events:>10,} events  {wall:7.1f} s  {events / wall:9,.0f} ev/s  "
        f"driver {peaks.driver / mib:6.0f} MiB  jvm {peaks.jvm / mib:6.0f} MiB  "
        f"py-workers {peaks.workers / mib:6.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--events", type=int, action="append")
    parser.add_argument("--inputs", type=int, default=2, help="captures (replicas) per size")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    for events in args.events or [1_000_000]:
        paths = [str(p) for p in inputs_of(args.work, events, args.inputs)]
        common = ["analyze", *paths, "--format", "json", "--fail-on", "none"]
        for path in paths:
            shutil.rmtree(Path(path) / ".seamwatch-cache", ignore_errors=True)
        wall, peaks = measure([*SEAMWATCH, *common], env)
        print(_line("polars-parse", events, wall, peaks), flush=True)
        wall, peaks = measure([*SEAMWATCH, *common], env)
        print(_line("polars", events, wall, peaks), flush=True)
        for path in paths:
            shutil.rmtree(Path(path) / ".seamwatch-cache", ignore_errors=True)
        for label in ("spark-parse", "spark"):
            _spark_run(label, events, [*SEAMWATCH, *common], env, args.master)


def _spark_run(label: str, events: int, argv: list[str], env: dict[str, str], master: str) -> None:
    """One Spark run, measured, with the shuffle of each stage from its event log."""
    with tempfile.TemporaryDirectory(prefix="spark-events-") as log_dir:
        spark_env = {
            **env,
            "PYSPARK_SUBMIT_ARGS": f"--conf spark.eventLog.enabled=true "
            f"--conf spark.eventLog.dir=file://{log_dir} "
            "--conf spark.eventLog.compress=false --conf spark.eventLog.rolling.enabled=false "
            "pyspark-shell",
        }
        wall, peaks = measure([*argv, "--engine", "spark", "--master", master], spark_env)
        print(_line(label, events, wall, peaks), flush=True)
        for sid, name, tasks, written, read, longest, most in shuffles(Path(log_dir)):
            print(
                f"    stage {sid:3} {tasks:4} tasks  shuffle write {written / 1e6:9.1f} MB  "
                f"read {read / 1e6:9.1f} MB  largest task {longest:7.1f} s "
                f"{most / 1e6:9.1f} MB  {name[:60]}",
                flush=True,
            )


if __name__ == "__main__":
    main()
