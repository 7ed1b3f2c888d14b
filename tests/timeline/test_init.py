"""analyzer.timeline: the Timeline, its frames' schemas, lazy vs materialized builds."""

from __future__ import annotations

import polars as pl
import pytest

from analyzer import schema as S
from analyzer.normalize import normalize_records
from analyzer.timeline import RawTables, Timeline, build_timeline
from tests.support import traffic


@pytest.fixture(scope="module")
def built() -> tuple[Timeline, Timeline]:
    frames = normalize_records(traffic.capture_records())
    lazy = build_timeline(RawTables.from_frames(frames), materialize=False)
    eager = build_timeline(RawTables.from_frames(frames))
    return lazy, eager


@pytest.mark.parametrize("name", sorted(S.TIMELINE_FRAMES))
def test_every_frame_has_its_declared_schema(built: tuple[Timeline, Timeline], name: str) -> None:
    for timeline in built:
        frame = timeline.frames()[name]
        S.assert_schema(frame, S.TIMELINE_FRAMES[name])
        S.assert_schema(frame.collect(), S.TIMELINE_FRAMES[name])


@pytest.mark.parametrize("name", sorted(S.TIMELINE_FRAMES))
def test_materializing_changes_no_value(built: tuple[Timeline, Timeline], name: str) -> None:
    lazy, eager = built
    a, b = lazy.frames()[name].collect(), eager.frames()[name].collect()
    key = [c for c in a.columns if a.schema[c] != pl.List]
    assert a.sort(key, nulls_last=True).equals(b.sort(key, nulls_last=True))


def test_empty_input_gives_empty_frames_of_the_right_schema() -> None:
    timeline = build_timeline(RawTables.from_frames(normalize_records([])))
    for name, frame in timeline.frames().items():
        collected = frame.collect()
        assert collected.height == 0, name
        S.assert_schema(collected, S.TIMELINE_FRAMES[name])


def test_payload_text_by_hash(built: tuple[Timeline, Timeline]) -> None:
    _, timeline = built
    hashes = timeline.sse_events.collect()["data_hash"].drop_nulls().to_list()
    texts = timeline.payload_text(hashes)
    assert set(texts) == set(hashes)
    assert any('"progress"' in text for text in texts.values())
