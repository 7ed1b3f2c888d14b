"""analyzer.timeline: the Timeline of the declared frames, their schemas, spilled or not."""

from __future__ import annotations

import pathlib
from collections import Counter
from dataclasses import fields
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer import schema as S
from analyzer.analysis import read_timeline
from analyzer.normalize import normalize_records
from analyzer.timeline import (
    RPC_MESSAGE_COLUMNS,
    RPC_MESSAGE_ROWS,
    RawTables,
    Timeline,
    build_timeline,
)
from analyzer.timeline.answers import ANSWER, CARRIER
from analyzer.timeline.cursors import (
    AFTER_CURSOR_EVENT_COLUMNS,
    LATEST_DELIVERY,
    RESUME_COLUMNS,
    carried_after_cursor,
    resumed_at_cursor,
)
from analyzer.timeline.frames import FRAMES, ON_TIMELINE, STORED
from analyzer.timeline.replays import (
    ISSUED,
    RECURRING_EVENT_COLUMNS,
    REPLAY_MESSAGE_COLUMNS,
    RESUMED_EVENT_COLUMNS,
)
from tests.support import traffic

SPILL_ROWS = "analyzer.timeline.kept.SPILL_ROWS"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Timeline, Timeline]:
    """The timeline of the sample traffic with every frame in memory, and with every frame
    that may spill in a Parquet file of a spill folder."""
    frames = normalize_records(traffic.capture_records())
    in_memory = build_timeline(RawTables.from_frames(frames))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SPILL_ROWS, 1)
        spill_dir = tmp_path_factory.mktemp("spill")
        spilled = build_timeline(RawTables.from_frames(frames), spill_dir=spill_dir)
    return spilled, in_memory


def test_the_timeline_has_a_field_for_each_declared_frame() -> None:
    names = [f.name for f in fields(Timeline)]
    assert sorted(set(names) - {"inputs", "payload_rows"}) == sorted(ON_TIMELINE)
    assert len({f.name for f in FRAMES}) == len(FRAMES)


@pytest.mark.parametrize("frame", [f for f in FRAMES if f.on_timeline], ids=lambda f: f.name)
def test_every_frame_has_its_declared_schema(built: tuple[Timeline, Timeline], frame: Any) -> None:
    for timeline in built:
        found = getattr(timeline, frame.name)
        S.assert_schema(found, frame.schema)
        S.assert_schema(found.collect(), frame.schema)


@pytest.mark.parametrize("frame", [f for f in FRAMES if f.on_timeline], ids=lambda f: f.name)
def test_spilling_changes_no_value(built: tuple[Timeline, Timeline], frame: Any) -> None:
    spilled, in_memory = built
    a = getattr(spilled, frame.name).collect()
    b = getattr(in_memory, frame.name).collect()
    # The scans join the records to their flows: their rows come in no set order.
    key = [c for c in a.columns if a.schema[c] != pl.List]
    assert a.sort(key, nulls_last=True).equals(b.sort(key, nulls_last=True))


def test_the_design_frames_are_declared_with_their_schemas() -> None:
    declared = {f.name: f.schema for f in FRAMES}
    assert {n: declared.get(n) for n in S.TIMELINE_FRAMES} == dict(S.TIMELINE_FRAMES)


def test_empty_input_gives_empty_frames_of_the_right_schema() -> None:
    timeline = build_timeline(RawTables.from_frames(normalize_records([])))
    for frame in FRAMES:
        if frame.on_timeline:
            collected = getattr(timeline, frame.name).collect()
            assert collected.height == 0, frame.name
            S.assert_schema(collected, frame.schema)


def test_payload_text_by_hash(built: tuple[Timeline, Timeline]) -> None:
    _, timeline = built
    hashes = timeline.sse_events.collect()["data_hash"].drop_nulls().to_list()
    texts = timeline.payload_text(hashes)
    assert set(texts) == set(hashes)
    assert any('"progress"' in text for text in texts.values())


def test_spilled_frames_read_back_the_same(
    built: tuple[Timeline, Timeline], monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    # A large frame waits in a Parquet file of the caller's folder: forced here for every frame.
    monkeypatch.setattr(SPILL_ROWS, 1)
    _, in_memory = built
    raw = RawTables.from_frames(normalize_records(traffic.capture_records()))
    spilled = build_timeline(raw, spill_dir=tmp_path)
    # A `sink` frame is written there whatever its size (then read back when small); a `spill`
    # one when it has rows (here 1 or more); a `memory` or `scan` one never.
    rows = {f.name: getattr(in_memory, f.name).collect().height for f in FRAMES if f.on_timeline}
    expected = [
        f.name for f in FRAMES if f.how == "sink" or (f.how == "spill" and rows.get(f.name, 0) >= 1)
    ]
    assert {"streams", "exchanges", "rpc_messages"} <= set(expected)
    # Nothing is carried after a cursor in this traffic: an empty frame stays in memory.
    assert in_memory.after_cursor.collect().is_empty() and "after_cursor" not in expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.parquet" for n in expected)
    for name in expected:
        frame = getattr(spilled, name)
        if rows.get(name):
            assert "parquet" in frame.explain().lower(), name
        got, want = frame.collect(), getattr(in_memory, name).collect()
        assert_frame_equal(got, want, check_row_order=False)


def test_without_a_spill_folder_every_frame_stays_in_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SPILL_ROWS, 1)
    timeline = build_timeline(RawTables.from_frames(normalize_records(traffic.capture_records())))
    # A frame from an expression that drops the Timeline at once is still readable.
    assert (
        build_timeline(RawTables.from_frames(normalize_records(traffic.capture_records())))
        .streams.collect()
        .height
    )
    for name in ("streams", "incarnations", "resumptions", "tool_calls", "sessions"):
        assert "parquet" not in timeline.frames()[name].explain().lower(), name


def test_rpc_messages_are_the_messages_rows_they_name(
    built: tuple[Timeline, Timeline], monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    built_spilled, eager = built
    expected = eager.messages.filter(RPC_MESSAGE_ROWS).select(RPC_MESSAGE_COLUMNS).collect()
    # Requests and responses kept, most notifications (those on event streams) left out.
    assert {"request", "response"} <= set(expected["kind"].to_list())
    assert expected.height < eager.messages.collect().height
    monkeypatch.setattr(SPILL_ROWS, 1)
    spilled = build_timeline(
        RawTables.from_frames(normalize_records(traffic.capture_records())), spill_dir=tmp_path
    )
    for timeline in (built_spilled, eager, spilled):
        got = timeline.rpc_messages.collect()
        assert_frame_equal(got.drop("answers", "answered"), expected, check_row_order=False)
        # Every answer here answers a captured request (`analyzer.timeline.answers`): one of its
        # session with its id, whose carrier `answers` names.
        answers = got.filter(ANSWER)
        requests = got.filter(pl.col("kind") == "request").select(
            "session_id", "rpc_id", CARRIER.alias("answers")
        )
        assert answers.height > 0 and answers["answers"].null_count() == 0
        assert (
            answers.join(requests, on=["session_id", "rpc_id", "answers"]).height == answers.height
        )
        # A request is answered when an answer to it came at or after it; others say nothing.
        replied = answers.group_by("session_id", "rpc_id", "answers").agg(pl.col("ts").max())
        flagged = got.filter(pl.col("kind") == "request").join(
            replied.rename({"answers": "carrier", "ts": "a_ts"}),
            left_on=["session_id", "rpc_id", CARRIER],
            right_on=["session_id", "rpc_id", "carrier"],
            how="left",
        )
        assert (
            flagged["answered"].to_list()
            == (flagged["a_ts"] >= flagged["ts"]).fill_null(False).to_list()
        )
        assert flagged["answered"].any()  # (unanswered ones: tests/detectors/test_lost_response)
        assert got.filter(pl.col("kind") != "request")["answered"].null_count() == (
            got.height - flagged.height
        )
    assert "parquet" in spilled.rpc_messages.explain().lower()


ROUND_ROBIN = (
    pathlib.Path(__file__).resolve().parents[1] / "fixtures/dashboard/round-robin-replicas"
)


@pytest.fixture(params=[False, True], ids=["in-memory", "spilled"])
def round_robin(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> tuple[Timeline, bool]:
    """The timeline of replicas that reuse each other's event ids and a resume answered by the
    other one; every frame kept in a Parquet file of a spill folder, or none; and which."""
    monkeypatch.setattr(SPILL_ROWS, 1)
    spill: bool = request.param
    found = read_timeline(
        [ROUND_ROBIN / "capture"], cache=False, spill_dir=tmp_path if spill else None
    )
    return found, spill


def test_replay_frames_are_the_sse_events_rows_they_name(
    round_robin: tuple[Timeline, bool],
) -> None:
    timeline, spill = round_robin
    events = timeline.sse_events.collect()

    def issued(row: dict[str, Any]) -> bool:
        return bool(row["event_id"]) and not row["id_only"]

    rows = list(events.iter_rows(named=True))
    counts = Counter((r["session_id"], r["event_id"]) for r in rows if issued(r))
    recurring = events.filter(
        pl.Series([issued(r) and counts[(r["session_id"], r["event_id"])] > 1 for r in rows])
    ).select(RECURRING_EVENT_COLUMNS)
    resumptions = timeline.resumptions.collect()
    continued = {
        r["stream_id"]
        for r in resumptions.iter_rows(named=True)
        if r["status"] == "resolved" and r["answer_stream_id"] == r["stream_id"]
    }
    resumed = events.filter(pl.col("stream_id").is_in(sorted(continued))).select(
        RESUMED_EVENT_COLUMNS
    )
    carriers = {(r["flow_id"], r["ordinal"]) for r in (*recurring.rows(named=True),
                                                        *resumed.rows(named=True))}  # fmt: skip
    messages = timeline.messages.collect()
    carried = messages.filter(
        pl.Series([(r["flow_id"], r["ordinal"]) in carriers for r in messages.rows(named=True)])
    ).select(REPLAY_MESSAGE_COLUMNS)
    assert recurring.height >= 2 and resumed.height >= 2  # the fixture holds both
    assert carried.height >= 2  # messages of both kinds of event
    assert_frame_equal(timeline.recurring_events.collect(), recurring, check_row_order=False)
    assert_frame_equal(timeline.resumed_events.collect(), resumed, check_row_order=False)
    assert_frame_equal(timeline.replay_messages.collect(), carried, check_row_order=False)
    assert ("parquet" in timeline.resumed_events.explain().lower()) == spill


def test_resumes_at_cursor_and_after_cursor_are_those_of_every_event(
    round_robin: tuple[Timeline, bool],
) -> None:
    # Kept from the resumed streams' events only; placed here from every event of the capture.
    timeline, _ = round_robin
    events = timeline.sse_events.select(RESUMED_EVENT_COLUMNS)
    resumes = resumed_at_cursor(timeline.resumptions, events, *RESUME_COLUMNS).collect()
    after = carried_after_cursor(
        resumes.lazy(),
        events.filter(ISSUED).select("stream_id", *AFTER_CURSOR_EVENT_COLUMNS),
        timeline.incarnations,
        ("event_id", "payload_hash"),
    ).collect()
    assert resumes.height >= 1 and after.height >= 1  # the fixture resumes after a gap
    assert_frame_equal(timeline.resumes_at_cursor.collect(), resumes, check_row_order=False)
    kept = timeline.after_cursor.collect()
    assert_frame_equal(kept.drop(LATEST_DELIVERY), after, check_row_order=False)


def test_after_cursor_latest_deliveries_are_those_of_every_event(
    round_robin: tuple[Timeline, bool],
) -> None:
    # Looked up among the resumed streams' events; here among every event of the capture.
    timeline, _ = round_robin
    events = timeline.sse_events.collect()
    after = timeline.after_cursor.collect()
    assert after.height >= 1
    for row in after.iter_rows(named=True):
        for key, prefix in (("event_id", "id"), ("payload_hash", "payload")):
            same = events.filter(
                (pl.col("stream_id") == row["stream_id"]) & (pl.col(key) == row[key])
            )
            assert same.height >= 1  # the row's own event at least
            assert row[f"{prefix}_last_inc"] == same["incarnation"].max()
            assert row[f"{prefix}_last_ts"] == same["ts"].max()


class Frames:
    """A store that keeps every frame `build_timeline` collects (as the cache would store it)."""

    def __init__(self) -> None:
        self.got: dict[str, pl.DataFrame] = {}

    def put(self, name: str, frame: pl.DataFrame) -> pathlib.Path | None:
        self.got[name] = frame
        return None

    def put_file(self, name: str, source: pathlib.Path, rows: int) -> None:
        self.got[name] = pl.read_parquet(source)


@pytest.mark.parametrize("records", [[], traffic.capture_records()], ids=["empty", "traffic"])
def test_every_collected_frame_is_stored_with_its_declared_schema(records: list[Any]) -> None:
    store = Frames()
    build_timeline(RawTables.from_frames(normalize_records(records)), store=store)
    assert list(store.got) == list(STORED)  # in the declared order
    for frame in FRAMES:
        if frame.name in store.got:
            S.assert_schema(store.got[frame.name], frame.schema)
