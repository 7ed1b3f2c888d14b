"""Benchmark: a capture folder named by a `file://` URI, on the Spark engine, without its cache.

    .venv/bin/python bench/spark_uri_bench.py CAPTURE --python PY [--python PY2] [--rounds 2]
        [--master local[2]]

CAPTURE is a folder of rotated capture files (`bench/synth_capture.py DIR --events 1000000`).
Each `--python` is an interpreter whose environment has seamwatch installed (one per checkout
to compare); their runs are taken in turn, `--rounds` times: A, B, A, B... Each run is
`seamwatch analyze file://CAPTURE --engine spark --no-cache --format json`, a process of its
own. Each line: wall time, CPU seconds of the process tree (the driver, the JVM, Spark's Python
workers; sampled from /proc every 0.2 s, so a process's last fraction of a second may be
missed), the load average when it started and a digest of the findings (the same on every line
when the engines agree); then, from Spark's event log, the first `--stages` stages (the ingest):
tasks, those that ran a second or more, the longest. Then the medians per interpreter.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of_tree(root: int) -> dict[int, float]:
    """pid -> CPU seconds (user + system) of `root` and its descendants, from /proc."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    out = {}
    for pid, seconds in cpu.items():
        walk = pid
        while walk in parent and walk != root:
            walk = parent[walk]
        if walk == root:
            out[pid] = seconds
    return out


def run(argv: list[str], env: dict[str, str], out: Path) -> tuple[float, float]:
    """Run `argv` in the folder of `out` (its stdout to `out`: `python -m` imports from the
    current folder first, so never from a checkout's); its wall time and the CPU seconds of
    its tree."""
    seen: dict[int, float] = {}
    done = threading.Event()
    start = time.perf_counter()
    with out.open("wb") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.PIPE, cwd=out.parent)

        def watch() -> None:
            while not done.is_set():
                for pid, seconds in _cpu_of_tree(proc.pid).items():
                    seen[pid] = max(seen.get(pid, 0.0), seconds)
                done.wait(0.2)

        watcher = threading.Thread(target=watch)
        watcher.start()
        _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    watcher.join()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return wall, sum(seen.values())


def stages(log_dir: Path) -> list[tuple[int, int, int, float, str]]:
    """Each stage of the event log: id, tasks, tasks that ran a second or more, its longest
    task's seconds, its name."""
    found: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    for path in sorted(p for p in log_dir.rglob("*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                names[int(info["Stage ID"])] = str(info["Stage Name"])
            elif kind == "SparkListenerTaskEnd":
                task = event.get("Task Info") or {}
                took = (task.get("Finish Time", 0) - task.get("Launch Time", 0)) / 1000
                found.setdefault(int(event["Stage ID"]), []).append(took)
    return [
        (sid, len(took), sum(t >= 1 for t in took), max(took), names.get(sid, "?"))
        for sid, took in sorted(found.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--python", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--stages", type=int, default=8, help="stages listed per run")
    args = parser.parse_args()
    uri = "file://" + str(args.capture.resolve())
    results: dict[str, list[tuple[float, float]]] = {py: [] for py in args.python}
    for round_ in range(args.rounds):
        for python in args.python:
            with tempfile.TemporaryDirectory(prefix="spark-uri-bench-") as work:
                logs = Path(work) / "events"
                logs.mkdir()
                env = {
                    **os.environ,
                    "PYSPARK_PYTHON": python,
                    "PYSPARK_DRIVER_PYTHON": python,
                    "PYSPARK_SUBMIT_ARGS": "--conf spark.eventLog.enabled=true "
                    f"--conf spark.eventLog.dir=file://{logs} "
                    "--conf spark.eventLog.compress=false "
                    "--conf spark.eventLog.rolling.enabled=false pyspark-shell",
                }
                argv = [python, "-m", "analyzer.cli", "analyze", uri, "--engine", "spark",
                        "--master", args.master, "--no-cache", "--format", "json",
                        "--fail-on", "none"]  # fmt: skip
                load = os.getloadavg()[0]
                report = Path(work) / "report.json"
                wall, cpu = run(argv, env, report)
                findings = json.loads(report.read_text())["findings"]
                digest = hashlib.sha256(
                    json.dumps(sorted(f["fingerprint"] for f in findings)).encode()
                ).hexdigest()[:12]
                results[python].append((wall, cpu))
                print(
                    f"round {round_ + 1}  {python}\n    wall {wall:7.1f} s  cpu {cpu:7.1f} s  "
                    f"load {load:5.1f}  {len(findings)} findings {digest}",
                    flush=True,
                )
                for sid, tasks, busy, longest, name in stages(logs)[: args.stages]:
                    print(f"    stage {sid:3} {tasks:4} tasks, {busy:4} of 1 s or more, "
                          f"longest {longest:6.1f} s  {name[:70]}")  # fmt: skip
    for python, runs in results.items():
        print(
            f"median of {len(runs)}  {python}: wall "
            f"{statistics.median(w for w, _ in runs):.1f} s, cpu "
            f"{statistics.median(c for _, c in runs):.1f} s"
        )


if __name__ == "__main__":
    main()
