"""The allocator's settings: the analysis's defaults, and the parse workers' own."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from analyzer import memory
from analyzer.memory import ANALYSIS, PARSE_WORKERS, VARIABLE


def _report(queue: multiprocessing.Queue[str | None]) -> None:
    queue.put(os.environ.get(VARIABLE))


def _started_inside(started: bool) -> str | None:
    """The variable as a process started (spawned) inside `starting_parse_workers` sees it, or
    outside it when `started` is False."""
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str | None] = context.Queue()
    process = context.Process(target=_report, args=(queue,))
    if started:
        with memory.starting_parse_workers():
            process.start()
    else:
        process.start()
    try:
        return queue.get(timeout=60)
    finally:
        process.join(timeout=60)


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


def test_a_process_started_for_the_parse_gets_the_workers_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VARIABLE, ANALYSIS)
    assert _started_inside(True) == PARSE_WORKERS
    assert os.environ[VARIABLE] == ANALYSIS  # this process's own is back
    assert _started_inside(False) == ANALYSIS


@pytest.mark.parametrize("own", [None, "narenas:1"])
def test_without_the_analysis_setting_the_workers_inherit_as_usual(
    monkeypatch: pytest.MonkeyPatch, own: str | None
) -> None:
    """A user's own value (or none: the pytest plugin, the dashboard) is everyone's."""
    if own is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, own)
    assert _started_inside(True) == own
    assert os.environ.get(VARIABLE) == own


def test_the_setting_comes_back_when_starting_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, ANALYSIS)
    with pytest.raises(RuntimeError), memory.starting_parse_workers():
        raise RuntimeError("the pool could not start")
    assert os.environ[VARIABLE] == ANALYSIS
