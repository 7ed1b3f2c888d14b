"""The timeline's frames, declared once: each one's name, schema and how it is kept.

`build_timeline` builds the frames in this order (each stage reads only frames above it);
`Timeline` has one field per frame `on_timeline` (a test holds them equal); what the cache
stores is every frame `stored`; `Kept` applies the one spill policy to each.

To add a frame: its stage (a `LazyFrame -> LazyFrame` function in this package), its schema in
`analyzer.schema.timeline` (and that module's `__all__`), a row here, a `Timeline` field if
detectors read it, and one `kept.keep(...)` line in `build_timeline` calling its stage. The
cache stores it, the spill policy applies, and a test checks its schema, with no other edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import polars as pl

from analyzer import schema as S

__all__ = ["FRAMES", "ON_TIMELINE", "STORED", "Frame", "How", "by_name"]

How = Literal["scan", "memory", "spill", "sink"]
"""How a frame is kept:

- `scan`: never collected: a lazy scan of the normalized tables joined to the flows' placement
  (a detector reads only the columns and rows it asks for);
- `memory`: collected and held in memory (every record-level scan joins to it);
- `spill`: collected; given a spill folder, one of `SPILL_ROWS` rows or more waits there as a
  Parquet file and is scanned back (`analyzer.timeline.kept`);
- `sink`: written by the streaming engine straight to a Parquet file in the spill folder, its
  rows never all in memory, then kept as `spill` keeps a frame.
"""


@dataclass(frozen=True)
class Frame:
    """One frame of the timeline."""

    name: str
    schema: pl.Schema
    how: How
    streaming: bool = False  # collected by the streaming engine: its plan scans Parquet tables
    on_timeline: bool = True  # a `Timeline` field (else read only to assemble the others)

    @property
    def stored(self) -> bool:
        """Kept in the cache for later analyses of the same inputs: every collected frame."""
        return self.how != "scan"


FRAMES: Final = (
    Frame("event_dates", S.EVENT_DATES, "memory", on_timeline=False),
    Frame("placement", S.PLACEMENT, "memory", on_timeline=False),
    Frame("sse_events", S.SSE_EVENTS, "scan"),
    Frame("messages", S.MESSAGES, "scan"),
    Frame("payloads", S.PAYLOADS, "scan"),
    Frame("rpc_messages", S.RPC_MESSAGES, "spill"),
    Frame("tool_calls", S.TOOL_CALLS, "spill"),
    Frame("streams", S.STREAMS, "spill"),
    Frame("incarnations", S.INCARNATIONS, "spill"),
    Frame("resumptions", S.RESUMPTIONS, "spill"),
    Frame("sessions", S.SESSIONS, "spill"),
    Frame("recurring_events", S.RECURRING_EVENTS, "sink"),
    Frame("resumed_events", S.RESUMED_EVENTS, "sink"),
    Frame("replay_messages", S.REPLAY_MESSAGES, "sink"),
    Frame("id_counters", S.ID_COUNTERS, "spill", streaming=True),
    Frame("exchanges", S.EXCHANGES, "spill", streaming=True),
    Frame("resumes_at_cursor", S.RESUMES_AT_CURSOR, "spill", streaming=True),
    Frame("after_cursor", S.AFTER_CURSOR, "spill", streaming=True),
    Frame("resumed_progress", S.RESUMED_PROGRESS, "sink"),
    Frame("progress", S.PROGRESS, "spill"),
)
"""Every frame, in the order `build_timeline` builds them."""

STORED: Final = tuple(f.name for f in FRAMES if f.stored)
"""The frames `build_timeline` collects and the cache stores, in order."""
ON_TIMELINE: Final = tuple(f.name for f in FRAMES if f.on_timeline)
_BY_NAME: Final = {f.name: f for f in FRAMES}


def by_name(name: str) -> Frame:
    """The declared frame of this name (KeyError for an undeclared one)."""
    return _BY_NAME[name]
