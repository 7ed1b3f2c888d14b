"""What Polars' allocator keeps of the memory it frees, per kind of process.

Polars allocates with jemalloc, which reads `_RJEM_MALLOC_CONF` once, when Polars loads: the
setting must be in a process's environment before it imports Polars, and a process started by
another inherits that one's. Polars' import puts its own defaults first in the variable (freed
pages kept half a second, then a second more as lazily freed), so a value set before it wins:
jemalloc takes the last value of each option.

- The analysis (`seamwatch` itself) returns freed pages at once (`ANALYSIS`): it builds and
  drops frames of every event of the inputs, and kept pages would add up to its peak memory.
- The first parse's workers (`analyzer.ingest.jsonl`) keep them a second (`PARSE_WORKERS`):
  each builds and drops the frames of one block of lines after another, of about the same
  size, so pages returned at once are faulted in again, zeroed, for the next block; kept a
  moment they are reused, and a worker holds one block's frames at a time whatever the input.

A value the user set is everyone's: neither setting replaces it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = [
    "ANALYSIS",
    "PARSE_WORKERS",
    "VARIABLE",
    "analysis_defaults",
    "options",
    "starting_parse_workers",
]

VARIABLE: Final = "_RJEM_MALLOC_CONF"
ANALYSIS: Final = "dirty_decay_ms:0,muzzy_decay_ms:0"
PARSE_WORKERS: Final = "dirty_decay_ms:1000,muzzy_decay_ms:0"

# The streaming engine's joins first buffer both inputs to pick a build side; by default that
# sample can take most of a scan of every event or payload. A small sample still finds the
# small side (the key sets detectors join on) and streams the large one.
_JOIN_SAMPLE: Final = ("POLARS_JOIN_SAMPLE_LIMIT", "10000")


def analysis_defaults() -> None:
    """The analysis's settings, where the user set none: call before anything imports Polars."""
    os.environ.setdefault(VARIABLE, ANALYSIS)
    os.environ.setdefault(*_JOIN_SAMPLE)


def options(value: str) -> dict[str, str]:
    """The options a jemalloc setting gives, the last value of each (as jemalloc reads it)."""
    pairs = (option.partition(":") for option in value.split(",") if option)
    return {name: given for name, _, given in pairs}


@contextmanager
def starting_parse_workers() -> Iterator[None]:
    """While held, the processes this one starts get the parse workers' setting, when this
    one runs with the analysis's (`analysis_defaults`, whatever Polars put before it); else
    they inherit its own as usual."""
    own = os.environ.get(VARIABLE)
    if own is None or not options(ANALYSIS).items() <= options(own).items():
        yield
        return
    os.environ[VARIABLE] = PARSE_WORKERS
    try:
        yield
    finally:
        os.environ[VARIABLE] = own
