"""analyzer.detectors._cursor: resumes placed at their cursor."""

from __future__ import annotations

import polars as pl

from analyzer.detectors._cursor import carried_after_cursor, resumed_at_cursor

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


def test_carried_after_cursor_is_the_range_between_cursor_and_resume() -> None:
    # Stream s: incarnation 0 (flow f0, 4 events), 1 (g1, 3 events), 2 (g2, 2 events), 3 (g3,
    # none); each resume r is the incarnation it names, at its time.
    incarnations = pl.LazyFrame(
        {
            "stream_id": ["s", "s", "s", "s", "t"],
            "incarnation": [0, 1, 2, 3, 0],
            "events": [4, 3, 2, 0, 2],
        }
    )
    placed = [  # (flow, incarnation, ordinal, ts)
        *(("f0", 0, k, 10 + k) for k in range(4)),
        *(("g1", 1, k, 20 + k) for k in range(3)),
        # Sent before g2's own request (22): still its own, never carried before it.
        *(("g2", 2, k, 15 + k) for k in range(2)),
    ]
    events = pl.LazyFrame(
        {
            "stream_id": ["s"] * len(placed) + ["t", "t"],
            "flow_id": [p[0] for p in placed] + ["t0", "t0"],
            "incarnation": [p[1] for p in placed] + [0, 0],
            "stream_pos": [[0, 4, 7][p[1]] + p[2] for p in placed] + [0, 1],
            "ts": [p[3] for p in placed] + [5, 6],
        }
    )
    resumes = pl.LazyFrame(
        {
            "stream_id": ["s", "s", "s", "s"],
            "r_flow": ["g1", "g2", "g3", "g3b"],
            "r_inc": [1, 2, 3, 3],
            "r_ts": [19, 22, 40, 31],
            "c_pos": [1, 3, 2, 8],
        }
    )
    got = carried_after_cursor(resumes, events, incarnations).collect()
    # The join it replaces: every event of the stream, filtered.
    want = (
        resumes.join(events, on="stream_id")
        .filter(
            (pl.col("stream_pos") > pl.col("c_pos"))
            & (pl.col("incarnation") < pl.col("r_inc"))
            & (pl.col("ts") < pl.col("r_ts"))
        )
        .collect()
    )
    key = ["r_flow", "stream_pos"]
    assert (
        got.select(sorted(want.columns))
        .sort(key)
        .equals(want.select(sorted(want.columns)).sort(key))
    )
    assert got.group_by("r_flow").agg(pl.col("stream_pos").sort()).sort("r_flow").rows() == [
        ("g1", [2, 3]),  # after the cursor (1), up to incarnation 1
        ("g2", [4, 5]),  # incarnation 1 after the cursor (3), sent before the resume (22)
        ("g3", [3, 4, 5, 6, 7, 8]),  # everything after position 2 before incarnation 3
        # g3b: position 8 is the last before incarnation 3: nothing after it
    ]
