"""What Polars' allocator keeps of the memory it frees, per kind of process.

Polars allocates with jemalloc, which reads `_RJEM_MALLOC_CONF` once, when Polars loads: the
setting must be in a process's environment before it imports Polars, and a process started by
another inherits that one's. Polars' import puts its own defaults first in the variable (freed
pages kept half a second, then a second more as lazily freed), so a value set before it wins:
jemalloc takes the last value of each option.

- The analysis (`seamwatch` itself) of large inputs returns freed pages at once (`ANALYSIS`): it
  builds and drops frames of every event of the inputs, and kept pages add up to its peak
  memory (10M events, 4.3 GB: 948 MiB returning them at once, 1,171 MiB keeping them 20 ms).
  Of smaller inputs (`SMALL_INPUTS`) it keeps them a quarter of a second (`SMALL_ANALYSIS`):
  returned at once, they are faulted in again, zeroed, by the next frame, which made the
  timeline and the detectors of 1M events 1.6x slower, for a peak that is small anyway.
- The first parse's workers (`analyzer.ingest.jsonl`) keep them a second (`PARSE_WORKERS`):
  each builds and drops the frames of one block of lines after another, of about the same
  size, so pages returned at once are faulted in again, zeroed, for the next block; kept a
  moment they are reused, and a worker holds one block's frames at a time whatever the input.

A value the user set is everyone's: neither setting replaces it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = [
    "ANALYSIS",
    "PARSE_WORKERS",
    "SMALL_ANALYSIS",
    "SMALL_INPUTS",
    "VARIABLE",
    "analysis_defaults",
    "analysis_setting",
    "inputs_bytes",
    "options",
    "starting_parse_workers",
]

VARIABLE: Final = "_RJEM_MALLOC_CONF"
ANALYSIS: Final = "dirty_decay_ms:0,muzzy_decay_ms:0"
SMALL_ANALYSIS: Final = "dirty_decay_ms:250,muzzy_decay_ms:0"
SMALL_INPUTS: Final = 1 << 30
"""Inputs of fewer bytes than this (about 2.3M events) are analyzed with `SMALL_ANALYSIS`."""
PARSE_WORKERS: Final = "dirty_decay_ms:1000,muzzy_decay_ms:0"

# The streaming engine's joins first buffer both inputs to pick a build side; by default that
# sample can take most of a scan of every event or payload. A small sample still finds the
# small side (the key sets detectors join on) and streams the large one.
_JOIN_SAMPLE: Final = ("POLARS_JOIN_SAMPLE_LIMIT", "10000")


def analysis_setting(size: int | None) -> str:
    """The analysis's allocator setting for inputs of `size` bytes (None: not known)."""
    return SMALL_ANALYSIS if size is not None and size < SMALL_INPUTS else ANALYSIS


def analysis_defaults(size: int | None = None) -> None:
    """The analysis's settings for inputs of `size` bytes (`inputs_bytes`; None: not known,
    taken as large), where the user set none: call before anything imports Polars."""
    os.environ.setdefault(VARIABLE, analysis_setting(size))
    os.environ.setdefault(*_JOIN_SAMPLE)


def inputs_bytes(paths: Sequence[str]) -> int | None:
    """The bytes of the files the inputs name: a file's own, a folder's files' (not those of
    its hidden folders, where the cache is); None when there are none or one is a URI or
    cannot be read (then the analysis is taken as large)."""
    total = 0
    for given in paths:
        path = Path(given)
        if "://" in given or (not path.is_file() and not path.is_dir()):
            return None
        try:
            if path.is_file():
                total += path.stat().st_size
                continue
            for folder, folders, files in os.walk(path, onerror=_raise):
                folders[:] = [name for name in folders if not name.startswith(".")]
                total += sum((Path(folder) / name).stat().st_size for name in files)
        except OSError:
            return None
    return total if paths else None


def _raise(error: OSError) -> None:
    raise error


def options(value: str) -> dict[str, str]:
    """The options a jemalloc setting gives, the last value of each (as jemalloc reads it)."""
    pairs = (option.partition(":") for option in value.split(",") if option)
    return {name: given for name, _, given in pairs}


@contextmanager
def starting_parse_workers() -> Iterator[None]:
    """While held, the processes this one starts get the parse workers' setting, when this
    one runs with one of the analysis's (`analysis_defaults`, whatever Polars put before it); else
    they inherit its own as usual."""
    own = os.environ.get(VARIABLE)
    if own is None or not any(
        options(analysis).items() <= options(own).items() for analysis in (ANALYSIS, SMALL_ANALYSIS)
    ):
        yield
        return
    os.environ[VARIABLE] = PARSE_WORKERS
    try:
        yield
    finally:
        os.environ[VARIABLE] = own
