"""analyzer.timeline.cursors: resumes placed at their cursor."""

from __future__ import annotations

import polars as pl

from analyzer.timeline.cursors import (
    LATEST_DELIVERY,
    after_cursor,
    carried_after_cursor,
    resumed_at_cursor,
)

# Stream s1 resumed by flow g1 (its own incarnation); s2 resumed by g2, which was answered as a
# new stream (not an incarnation of s2); s3 a cursor that resolved to nothing.
RESUMPTIONS = pl.LazyFrame(
    {
        "flow_id": ["g1", "g2", "g3"],
        "ts": [10, 20, 30],
        "status": ["resolved", "resolved", "unresolved"],
        "stream_id": ["s1", "s2", "s3"],
        "answer_stream_id": ["s1", "g2", None],
        "answer_incarnation": [1, 0, None],
        "cursor": ["e2", "f1", "x9"],
        "cursor_flow_id": ["s1", "s2", None],
    }
)
EVENTS = pl.LazyFrame(
    {
        "stream_id": ["s1", "s1", "s1", "s1", "s2", "s2", "s3", None],
        "flow_id": ["s1", "s1", "s1", "g1", "s2", "s2", "s3", "z"],
        "event_id": ["e1", "e2", "e3", "e3", "f1", "f2", "x9", "e2"],
        "stream_pos": [0, 1, 2, 3, 0, 1, 0, 0],
    }
)


def test_placing_resumes_reads_only_the_resumed_streams_events() -> None:
    # The cursor's flow is an incarnation of the stream it resolves to: the events of the
    # resumed streams alone place every resume as all the events do.
    everything = resumed_at_cursor(RESUMPTIONS, EVENTS).collect()
    resumed = resumed_at_cursor(
        RESUMPTIONS,
        EVENTS.filter(pl.col("stream_id") == "s1"),  # `Timeline.resumed_events`
    ).collect()
    assert resumed.equals(everything)
    assert resumed.select("stream_id", "cursor", "r_flow", "c_pos").rows() == [
        ("s1", "e2", "g1", 1)
    ]


def _summary(rows: pl.DataFrame) -> list[tuple[object, ...]]:
    """Per resume, each key it was due and the first position it came at."""
    return (
        rows.group_by("r_flow", "event_id", "payload_hash")
        .agg(pl.col("stream_pos").min())
        .sort("r_flow", "stream_pos", "event_id", "payload_hash")
        .rows()
    )


def test_carried_after_cursor_is_the_range_between_cursor_and_resume() -> None:
    # Stream s: incarnation 0 (flow f0, 4 events), 1 (g1, 3 events), 2 (g2, 2 events), 3 (g3,
    # none); each resume r is the incarnation it names, at its time.
    incarnations = pl.LazyFrame(
        {
            "stream_id": ["s", "s", "s", "s", "t"],
            "incarnation": [0, 1, 2, 3, 0],
            "base_events": [0, 4, 7, 9, 0],  # 4, 3, 2 and 0 events
        }
    )
    placed = [  # (flow, incarnation, ordinal, ts, event_id, payload_hash)
        ("f0", 0, 0, 10, "e1", "p1"),
        ("f0", 0, 1, 11, "e2", "p2"),
        ("f0", 0, 2, 12, "e3", "p3"),
        ("f0", 0, 3, 25, "e4", "p4"),  # sent after g1's request (20): not before g1
        ("g1", 1, 0, 20, "e3", "p3"),  # a replay of e3
        ("g1", 1, 1, 21, "e4", "p4"),  # e4 again, sent earlier than its first
        ("g1", 1, 2, 22, "e4", "p9"),  # e4 with another payload
        # Sent before g2's own request (22): still its own, never carried before it.
        ("g2", 2, 0, 15, "e5", "p5"),
        ("g2", 2, 1, 16, "e3", "p3"),
    ]
    events = pl.LazyFrame(
        {
            "stream_id": ["s"] * len(placed) + ["t", "t"],
            "flow_id": [p[0] for p in placed] + ["t0", "t0"],
            "incarnation": [p[1] for p in placed] + [0, 0],
            "stream_pos": [[0, 4, 7][p[1]] + p[2] for p in placed] + [0, 1],
            "ts": [p[3] for p in placed] + [5, 6],
            "event_id": [p[4] for p in placed] + ["x", "y"],
            "payload_hash": [p[5] for p in placed] + ["px", "py"],
        }
    )
    resumes = pl.LazyFrame(
        {
            "stream_id": ["s", "s", "s", "s", "s"],
            "r_flow": ["g1", "g2", "g3", "g3b", "g3c"],
            "r_inc": [1, 2, 3, 3, 3],
            "r_ts": [20, 22, 40, 31, 23],
            "c_pos": [1, 3, 1, 8, 1],
        }
    )
    got = carried_after_cursor(resumes, events, incarnations, ("event_id", "payload_hash"))
    # The join it replaces: every event of the stream, filtered.
    want = resumes.join(events, on="stream_id").filter(
        (pl.col("stream_pos") > pl.col("c_pos"))
        & (pl.col("incarnation") < pl.col("r_inc"))
        & (pl.col("ts") < pl.col("r_ts"))
    )
    assert _summary(got.collect()) == _summary(want.collect())
    assert _summary(got.collect()) == [
        ("g1", "e3", "p3", 2),  # after the cursor (1), up to incarnation 1; e4 came at 25
        ("g2", "e3", "p3", 4),  # incarnation 1 after the cursor (3), sent before 22: not 6
        ("g2", "e4", "p4", 5),
        ("g3", "e3", "p3", 2),  # everything after position 1 before incarnation 3
        ("g3", "e4", "p4", 3),
        ("g3", "e4", "p9", 6),
        ("g3", "e5", "p5", 7),
        # g3b: position 8 is the last before incarnation 3: nothing after it
        ("g3c", "e3", "p3", 2),  # the same cursor as g3, sent before 23: e4 first at 5 (21)
        ("g3c", "e4", "p4", 5),
        ("g3c", "e4", "p9", 6),
        ("g3c", "e5", "p5", 7),
    ]


def test_carried_after_cursor_reads_a_resume_loop_once_a_key() -> None:
    # Ten resumes of one cursor (after e1), each replaying e2..e4 on an incarnation of its own:
    # each was due e2..e4, from their first sending; the replays add no row.
    k = 10
    incarnations = pl.LazyFrame(  # 4 events, then 3 a resume
        {
            "stream_id": ["s"] * (k + 1),
            "incarnation": list(range(k + 1)),
            "base_events": [0] + [4 + 3 * (i - 1) for i in range(1, k + 1)],
        }
    )
    rows = [(0, p, 10 + p, f"e{p + 1}") for p in range(4)] + [
        (i, 4 + 3 * (i - 1) + n, 100 * i + n, f"e{n + 2}")
        for i in range(1, k + 1)
        for n in range(3)
    ]
    events = pl.LazyFrame(
        {
            "stream_id": ["s"] * len(rows),
            "incarnation": [r[0] for r in rows],
            "stream_pos": [r[1] for r in rows],
            "ts": [r[2] for r in rows],
            "event_id": [r[3] for r in rows],
            "payload_hash": [f"p{r[3]}" for r in rows],
        }
    )
    resumes = pl.LazyFrame(
        {
            "stream_id": ["s"] * k,
            "r_flow": [f"r{i}" for i in range(1, k + 1)],
            "r_inc": list(range(1, k + 1)),
            "r_ts": [100 * i - 1 for i in range(1, k + 1)],
            "c_pos": [0] * k,
        }
    )
    got = carried_after_cursor(
        resumes, events, incarnations, ("event_id", "payload_hash")
    ).collect()
    assert len(got) == 3 * k
    assert got.group_by("r_flow").agg(pl.col("stream_pos").sort()).sort("r_flow").rows() == [
        (f"r{i}", [1, 2, 3]) for i in sorted(range(1, k + 1), key=lambda i: f"r{i}")
    ]


def test_after_cursor_says_when_the_stream_carried_each_event_again() -> None:
    # Stream s: incarnation 0 sent e1..e3; the resume from e1 (incarnation 1) replayed e2 and
    # sent e3's payload again under the id e9, then e3's id again with another payload.
    events = pl.LazyFrame(
        {
            "stream_id": ["s"] * 6,
            "flow_id": ["f0", "f0", "f0", "g1", "g1", "g1"],
            "incarnation": [0, 0, 0, 1, 1, 1],
            "stream_pos": [0, 1, 2, 3, 4, 5],
            "ts": [10, 11, 12, 30, 31, 32],
            "event_id": ["e1", "e2", "e3", "e2", "e9", "e3"],
            "payload_hash": ["p1", "p2", "p3", "p2", "p3", "p8"],
            "id_only": [False] * 6,
        }
    )
    incarnations = pl.LazyFrame(
        {"stream_id": ["s", "s"], "incarnation": [0, 1], "base_events": [0, 3]}
    )
    resumes = pl.LazyFrame(
        {"stream_id": ["s"], "r_flow": ["g1"], "r_inc": [1], "r_ts": [29], "c_pos": [0]}
    )
    got = after_cursor(resumes, events, incarnations).sort("stream_pos").collect()
    assert got.select("event_id", *LATEST_DELIVERY).rows() == [
        ("e2", 1, 30, 1, 30),  # replayed as it was
        ("e3", 1, 32, 1, 31),  # its id came again at 32, its payload (as e9) at 31
    ]
