"""Benchmark: the Live page's refresh, incremental (`CaptureTail`) against a full re-read.

    .venv/bin/python bench/synth_capture.py CAPTURE_DIR --events 200000
    .venv/bin/python bench/tail_bench.py CAPTURE_DIR --new 1000 --work SCRATCH_DIR

The capture is copied to `--work` with its last records held back and its last file renamed to
`.partial`, as a running proxy leaves it. Then, in this one process:

- first:    the tail's first poll, then its timeline (`LiveTimeline`: everything read, here);
- idle:     a poll that finds no new bytes (stat only), and the timeline asked again;
- append:   the held-back records (about `--new` SSE events) appended, then a poll and the
            timeline rebuilt (what one Live refresh costs now);
- collects: what the Live page then reads: the SSE events counted, the latest exchanges, and
            one detector (`--detector`, default duplicate-event-id) run on the tail's timeline;
- reread:   `read_timeline` of the same files, its Parquet cache missing (what a refresh cost
            before: the whole input parsed again, both cores when it is large).

Memory: `rss_after_first_mb` and `peak_rss_tail_mb` are the process's peak RSS after the first
poll and after the collects (the tail's share: nothing else ran yet); `rss_tail_now_mb` is the
RSS held at that point (Linux); `tail_folder_mb` what the tail keeps on disk instead.
`peak_rss_mb` is the peak after the reread too. To compare two versions of the reader, run the
same command with each on the import path, one after the other.

`--detectors` also times every detector (`run_detectors`) on both timelines.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import time
from pathlib import Path


def _prepare(source: Path, work: Path, new_events: int) -> tuple[Path, bytes]:
    """Copy the capture, hold back its last records (about `new_events` chunks)."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(source, work)
    last = sorted(work.glob("*.jsonl"))[-1]
    lines = last.read_bytes().splitlines(keepends=True)
    held = 0
    cut = len(lines)
    while cut > 1 and held < new_events:
        cut -= 1
        if b'"kind":"chunk"' in lines[cut]:
            held += 1
    partial = last.with_name(last.name + ".partial")
    last.rename(partial)
    partial.write_bytes(b"".join(lines[:cut]))
    return partial, b"".join(lines[cut:])


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _peak_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _rss_now_mb() -> int | None:
    """The resident set size now (Linux), in MB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return None


def _folder_mb(folder: Path | None) -> float | None:
    if folder is None or not folder.exists():
        return None
    return round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--new", type=int, default=1000, help="SSE events appended")
    parser.add_argument("--work", type=Path, required=True, help="scratch copy of the capture")
    parser.add_argument("--detector", default="duplicate-event-id", help="run on the tail")
    parser.add_argument("--detectors", action="store_true", help="time every detector too")
    args = parser.parse_args()

    import polars as pl

    from analyzer.analysis import LiveTimeline, read_timeline
    from analyzer.detectors import DETECTORS, run_detectors
    from analyzer.ingest.tail import CaptureTail

    partial, rest = _prepare(args.capture, args.work, args.new)
    out: dict[str, object] = {"bytes": sum(f.stat().st_size for f in args.work.glob("*.jsonl*"))}

    tail = CaptureTail(args.work)
    live = LiveTimeline(tail)
    start = time.perf_counter()
    first = tail.poll()
    out["first_poll_ms"] = _ms(time.perf_counter() - start)
    live.timeline()
    out["first_ms"] = _ms(time.perf_counter() - start)
    out["first_records"] = first.records
    out["rss_after_first_mb"] = _peak_mb()

    idle = []
    for _ in range(20):
        start = time.perf_counter()
        polled = tail.poll()
        live.timeline()
        idle.append(time.perf_counter() - start)
        assert not polled.changed and polled.bytes_read == 0
    out["idle_poll_ms_median"] = _ms(statistics.median(idle))

    with partial.open("ab") as fh:
        fh.write(rest)
    start = time.perf_counter()
    polled = tail.poll()
    poll_s = time.perf_counter() - start
    timeline = live.timeline()
    total_s = time.perf_counter() - start
    out["append_bytes"] = polled.bytes_read
    out["append_records"] = polled.records
    out["append_poll_ms"] = _ms(poll_s)
    out["append_poll_and_timeline_ms"] = _ms(total_s)

    start = time.perf_counter()
    events = timeline.sse_events.select(pl.len()).collect().item()
    timeline.exchanges.sort("ts", "seq", descending=True).head(50).collect()
    run_detectors(timeline, only=[args.detector])
    out["collects_ms"] = _ms(time.perf_counter() - start)
    out["peak_rss_tail_mb"] = _peak_mb()
    out["rss_tail_now_mb"] = _rss_now_mb()
    out["tail_folder_mb"] = _folder_mb(getattr(tail, "folder", None))  # None: rows in memory

    start = time.perf_counter()
    full = read_timeline([args.work], cache=False)
    out["reread_ms"] = _ms(time.perf_counter() - start)
    assert full.sse_events.select(pl.len()).collect().item() == events
    out["events"] = events

    if args.detectors:
        start = time.perf_counter()
        run_detectors(timeline, detectors=DETECTORS)
        out["detectors_on_tail_ms"] = _ms(time.perf_counter() - start)
        start = time.perf_counter()
        run_detectors(full, detectors=DETECTORS)
        out["detectors_on_reread_ms"] = _ms(time.perf_counter() - start)
    out["peak_rss_mb"] = _peak_mb()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
