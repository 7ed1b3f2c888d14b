"""analyzer.timeline.frames: the one declaration of the timeline's frames."""

from __future__ import annotations

import pytest

from analyzer import schema as S
from analyzer.timeline.frames import FRAMES, ON_TIMELINE, STORED, by_name


def test_names_are_unique_and_found_by_name() -> None:
    assert len({f.name for f in FRAMES}) == len(FRAMES)
    assert [by_name(f.name) for f in FRAMES] == list(FRAMES)
    with pytest.raises(KeyError):
        by_name("no_such_frame")


def test_every_collected_frame_is_stored_and_no_scan_is() -> None:
    assert tuple(f.name for f in FRAMES if f.how != "scan") == STORED
    assert {"sse_events", "messages", "payloads"}.isdisjoint(STORED)
    assert {"placement", "event_dates"} <= set(STORED) - set(ON_TIMELINE)


def test_each_schema_leads_with_its_key_columns_in_order() -> None:
    # STYLE.md 7: `session_id, stream_id, ts, seq` first, in that order, where they apply.
    keys = ["session_id", "stream_id", "ts", "seq"]
    for frame in FRAMES:
        present = [c for c in frame.schema.names() if c in keys]
        assert present == [k for k in keys if k in present], frame.name
    assert {f.name: f.schema for f in FRAMES}["exchanges"] is S.EXCHANGES
