"""The allocator's settings: the analysis's defaults, and the parse workers' own."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer import memory
from analyzer.memory import ANALYSIS, PARSE_WORKERS, SMALL_ANALYSIS, VARIABLE, options

# What Polars' import makes of the analysis's setting (checked by the first test below).
_POLARS_FIRST = "dirty_decay_ms:500,muzzy_decay_ms:1000,"
_AFTER_POLARS = f"{_POLARS_FIRST}{ANALYSIS}"


def _report(queue: multiprocessing.Queue[str | None]) -> None:
    queue.put(os.environ.get(VARIABLE))


def _started(inside: bool) -> str | None:
    """The variable as a process started (spawned) inside `starting_parse_workers`, or outside
    it, sees it."""
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str | None] = context.Queue()
    process = context.Process(target=_report, args=(queue,))
    if inside:
        with memory.starting_parse_workers():
            process.start()
    else:
        process.start()
    try:
        return queue.get(timeout=60)
    finally:
        process.join(timeout=60)


_FRESH = """
import multiprocessing, os, sys
from analyzer import memory
memory.analysis_defaults()
import polars
def report(queue):
    import polars
    queue.put(os.environ[memory.VARIABLE])
if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=report, args=(queue,))
    with memory.starting_parse_workers():
        process.start()
    print(os.environ[memory.VARIABLE])
    print(queue.get(timeout=60))
    process.join(timeout=60)
"""


def test_through_polars_import_the_analysis_and_its_workers_run_with_their_own(
    tmp_path: Path,
) -> None:
    """In a fresh interpreter, as `seamwatch` runs: the analysis's setting is what jemalloc
    reads after Polars put its defaults first, and a worker started for the parse reads the
    workers' (after its own import of Polars)."""
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    script = tmp_path / "fresh.py"  # a file: spawn re-imports the parent's main module
    script.write_text(_FRESH)
    run = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    analysis, worker = run.stdout.split()
    assert analysis == _AFTER_POLARS
    assert options(analysis) == options(ANALYSIS)
    assert options(worker) == options(PARSE_WORKERS)


def test_analysis_defaults_set_what_is_unset_and_keep_the_users_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.delenv("POLARS_JOIN_SAMPLE_LIMIT", raising=False)
    memory.analysis_defaults()
    assert os.environ[VARIABLE] == ANALYSIS
    assert os.environ["POLARS_JOIN_SAMPLE_LIMIT"] == "10000"
    monkeypatch.setenv(VARIABLE, "narenas:1")
    memory.analysis_defaults()
    assert os.environ[VARIABLE] == "narenas:1"


@pytest.mark.parametrize(
    "own", [ANALYSIS, _AFTER_POLARS, SMALL_ANALYSIS, f"{_POLARS_FIRST}{SMALL_ANALYSIS}"]
)
def test_a_process_started_for_the_parse_gets_the_workers_setting(
    monkeypatch: pytest.MonkeyPatch, own: str
) -> None:
    monkeypatch.setenv(VARIABLE, own)
    assert _started(inside=True) == PARSE_WORKERS
    assert os.environ[VARIABLE] == own  # this process's own is back
    assert _started(inside=False) == own


@pytest.mark.parametrize("own", [None, "narenas:1", "dirty_decay_ms:0", "dirty_decay_ms:250"])
def test_without_the_analysis_setting_the_workers_inherit_as_usual(
    monkeypatch: pytest.MonkeyPatch, own: str | None
) -> None:
    """A user's own value (or none: the pytest plugin, the dashboard) is everyone's."""
    if own is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, own)
    assert _started(inside=True) == own
    assert os.environ.get(VARIABLE) == own


def test_options_read_as_jemalloc_does_the_last_value_of_each() -> None:
    assert options("a:1,b:2,a:3") == {"a": "3", "b": "2"}
    assert options("") == {}


def test_the_setting_comes_back_when_starting_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, _AFTER_POLARS)
    with pytest.raises(RuntimeError), memory.starting_parse_workers():
        raise RuntimeError("the pool could not start")
    assert os.environ[VARIABLE] == _AFTER_POLARS


def test_small_inputs_are_analyzed_keeping_freed_pages_a_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "SMALL_INPUTS", 1000)
    assert memory.analysis_setting(999) == SMALL_ANALYSIS
    assert memory.analysis_setting(1000) == ANALYSIS
    assert memory.analysis_setting(None) == ANALYSIS  # not known: taken as large
    monkeypatch.delenv(VARIABLE, raising=False)
    memory.analysis_defaults(10)
    assert os.environ[VARIABLE] == SMALL_ANALYSIS
    monkeypatch.setenv(VARIABLE, "narenas:1")
    memory.analysis_defaults(10)
    assert os.environ[VARIABLE] == "narenas:1"  # the user's own stays


def test_the_inputs_bytes_are_their_files_but_the_cache(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    (capture / "rotated").mkdir(parents=True)
    (capture / ".seamwatch-cache" / "entry").mkdir(parents=True)
    (capture / "capture-0.jsonl").write_bytes(b"x" * 100)
    (capture / "rotated" / "capture-1.jsonl").write_bytes(b"x" * 20)
    (capture / ".seamwatch-cache" / "entry" / "events.parquet").write_bytes(b"x" * 5000)
    dump = tmp_path / "flows.mitm"
    dump.write_bytes(b"x" * 7)
    assert memory.inputs_bytes([str(capture)]) == 120
    assert memory.inputs_bytes([str(capture), str(dump)]) == 127
    assert memory.inputs_bytes([str(dump)]) == 7
    assert memory.inputs_bytes([]) is None
    assert memory.inputs_bytes([str(tmp_path / "missing")]) is None
    assert memory.inputs_bytes([str(dump), "hdfs://namenode/captures/"]) is None


_CLI = """
import os, sys
from analyzer import memory
from analyzer.cli import main
code = main(["analyze", *sys.argv[1:], "--format", "json", "--fail-on", "none",
             "--out", os.devnull])
print(code, "polars" in sys.modules, os.environ[memory.VARIABLE])
"""


@pytest.mark.parametrize("small", [True, False])
def test_the_command_sets_the_analysis_by_its_inputs_before_polars_loads(
    tmp_path: Path, small: bool
) -> None:
    """`seamwatch analyze` in a fresh interpreter: Polars' import put its defaults before the
    setting, so the setting was there first; inputs under `SMALL_INPUTS` get the small one."""
    capture = tmp_path / "capture"
    capture.mkdir()
    line = b'{"seq":0,"kind":"capture_open","ts_ns":1,"schema":"1.2","run_id":"r"}\n'
    (capture / "capture-0.jsonl").write_bytes(line)
    inputs = [str(capture)] if small else [str(capture), "http://example.invalid/captures/"]
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    run = subprocess.run(
        [sys.executable, "-c", _CLI, *inputs], env=env, capture_output=True, text=True, timeout=120
    )
    code, loaded, setting = run.stdout.split()
    assert loaded == "True" and setting == _POLARS_FIRST + (SMALL_ANALYSIS if small else ANALYSIS)
    assert code == ("0" if small else "2"), run.stderr  # a URI without Spark: a usage error
