"""analyzer.detectors._cursor: resumes placed at their cursor."""

from __future__ import annotations

import polars as pl

from analyzer.detectors._cursor import resumed_at_cursor

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
