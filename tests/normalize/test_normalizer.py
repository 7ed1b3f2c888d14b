"""analyzer.normalize.normalizer: the batches a Normalizer drains and finishes with."""

from __future__ import annotations

import polars as pl

from analyzer.normalize import Normalizer
from tests.support.records import Capture


def test_batches_drain_without_losing_rows() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True)
    for n in range(25):
        c.chunk(f, f'id: {n}\ndata: {{"n": {n}}}\n\n', n=n)
    normalizer = Normalizer(batch_events=10)
    parts = []
    for record in c.records:
        normalizer.add(record)
        if normalizer.pending_events() >= 10:
            parts.append(normalizer.drain())
    parts.append(normalizer.finish())
    assert [p.events.height for p in parts] == [10, 10, 5]
    assert pl.concat([p.events for p in parts])["ordinal"].to_list() == list(range(25))


def test_a_flow_row_is_written_at_its_stream_end() -> None:
    c = Capture()
    done = c.request("GET")
    c.response(done, 405)
    c.end(done)
    still_open = c.request("GET")
    c.response(still_open, sse=True)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert normalizer.drain().flows["flow_id"].to_list() == ["f1"]
    assert normalizer.finish().flows.select("flow_id", "end_how").rows() == [("f2", None)]
