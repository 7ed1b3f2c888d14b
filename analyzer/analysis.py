"""An analysis's timeline from its inputs, through the parse cache: the one place that knows the
ingest and timeline entry points, for the commands (`analyze`, `export`) and the pytest plugin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from analyzer import SeamwatchError
from analyzer.cache import read_through
from analyzer.command import UsageError, one_line
from analyzer.ingest import IngestError
from analyzer.timeline import Timeline
from analyzer.timeline import load_timeline as read_timeline


def load_timeline(
    paths: Sequence[Path],
    *,
    replica_header: str | None,
    client_header: str | None,
    use_cache: bool,
    on_progress: Callable[[str, int, int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    spill_dir: Path | None = None,
) -> Timeline:
    """Read every input into one timeline; unreadable input is a UsageError (exit 2)."""

    def load(cache: bool) -> Timeline:
        return read_timeline(
            paths,
            replica_header=replica_header,
            client_header=client_header,
            cache=cache,
            on_progress=on_progress,
            on_step=on_step,
            spill_dir=spill_dir,
        )

    try:
        return read_through(load, use_cache=use_cache)
    except (IngestError, SeamwatchError, OSError) as e:
        raise UsageError(one_line(e)) from None
