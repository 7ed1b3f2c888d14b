"""analyzer.normalize.handlers: each record kind taken into the flow state and the columns."""

from __future__ import annotations

import base64
import gzip
import zlib
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer import schema as S
from analyzer.canonical import canonical_hash
from analyzer.capture.framing import ContentDecoder
from analyzer.normalize import Normalizer, handlers, normalize_records
from analyzer.normalize import describe as N
from tests.support.records import Capture, event, ms, req, res, sse

H = {"mcp-session-id": "S1"}


def ts(at: float) -> Any:
    return pl.Series([ms(at)]).cast(S.TS).item()


def test_event_takes_ts_and_seq_of_the_chunk_that_completed_it() -> None:
    c = Capture()
    f = c.request("GET", headers=H, at=0)
    c.response(f, sse=True, at=1)
    c.chunk(f, 'id: 1\ndata: {"jsonrpc":"2.0",', n=0, at=2)  # event incomplete
    c.chunk(f, '"method":"a"}\n\nid: 2\ndata: x\n\n', n=1, at=3)  # completes both
    c.chunk(f, ": ping\nid: 3\n\n", n=2, at=4)
    c.end(f, at=5)
    events = normalize_records(c.records).events
    expected = pl.DataFrame(
        {
            "flow_id": ["f1"] * 3,
            "ts": [ts(3), ts(3), ts(4)],
            "seq": [3, 3, 4],
            "ordinal": [0, 1, 2],
            "chunk_n": [1, 1, 2],
            "event_id": ["1", "2", "3"],
            "last_event_id": ["1", "2", "3"],
            "event": ["message"] * 3,
            "data_bytes": [30, 1, 0],
            "retry": [None, None, None],
            "id_only": [False, False, True],
            "comments": [0, 0, 1],
            "warnings": [[], [], []],
            "payload_seen": [1, 2, 2],
        },
        schema_overrides={k: v for k, v in S.RAW_EVENTS.items()},
    )
    assert_frame_equal(events.select(expected.columns), expected)
    assert events["data_hash"].null_count() == 1  # the id-only event has no payload


def test_bytes_withheld_from_chunks_count_as_a_truncated_response() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.chunk(f, sse(event({"x": 1}, id="a")), n=0)
    c.chunk(f, 'data: {"cut', n=1)
    c.records[-1]["data"]["truncated_bytes"] = 1000
    c.chunk(f, '\n\ndata: {"cut', n=2)
    c.records[-1]["data"]["truncated_bytes"] = 24
    c.end(f)
    row = normalize_records(c.records).flows.row(0, named=True)
    assert row["response_truncated_bytes"] == 1024


def _undecodable(encoding: str, raw: bytes) -> str:
    decoder = ContentDecoder(encoding)
    decoder.decode(raw)
    assert decoder.failed is not None
    return decoder.failed


@pytest.mark.parametrize(
    "failure",
    [
        _undecodable("compress", b"x"),
        _undecodable("gzip", b"not gzip at all"),
        _undecodable("gzip", gzip.compress(b"data: x\n\n") + b"trailing garbage"),
        _undecodable("deflate", zlib.compress(b"data: x\n\n") + b"garbage"),
        _undecodable("br", b"\xff\xff\xff not br"),
        "peer closed connection; " + _undecodable("br", b"\xff\xff\xff not br"),
    ],
)
def test_a_stream_the_proxy_could_not_decode_is_a_body_missing(failure: str) -> None:
    """However the decoder words its failure (the stream's end error), the normalizer knows it:
    the flow's body is not all in the capture, and the input's report says so."""
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.end(f, "complete", error=failure)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    row = normalizer.finish().flows.row(0, named=True)
    assert row["body_missing"] is True
    assert normalizer.counts == {"undecoded_body": 1}


def test_a_transport_error_alone_is_no_missing_body() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.end(f, "error", error="peer closed connection without sending complete message body")
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert normalizer.finish().flows.row(0, named=True)["body_missing"] is None
    assert normalizer.counts == {}


def test_payload_hash_is_canonical_and_payload_text_is_stored_once() -> None:
    c = Capture()
    f = c.request("GET", headers=H)
    c.response(f, sse=True)
    c.chunk(f, 'id: 1\ndata: {"b":1,"a":2}\n\n', n=0)
    c.chunk(f, 'id: 2\ndata: {"a":2, "b":1}\n\n', n=1)  # same value, other bytes
    c.chunk(f, 'id: 3\ndata: {"b":1,"a":2}\n\n', n=2)  # same bytes as 1
    frames = normalize_records(c.records)
    events = frames.events
    assert events["payload_hash"].n_unique() == 1
    assert events["payload_hash"][0] == canonical_hash({"a": 2, "b": 1})
    assert events["data_hash"].n_unique() == 2
    assert frames.payloads.height == 2
    assert set(frames.payloads["text"]) == {'{"b":1,"a":2}', '{"a":2, "b":1}'}


def test_damage_is_counted_and_skipped() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True)
    c.chunk(f, "id: 1\ndata: a\n\n", n=0)
    c.chunk(f, "id: 1\ndata: a\n\n", n=0)  # duplicate
    c.chunk(f, "id: 3\ndata: c\n\n", n=2)  # chunk 1 lost
    c.end(f)
    c.end(f)  # duplicate
    c.chunk(f, "id: 4\ndata: d\n\n", n=3)  # after the end
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    frames = normalizer.finish()
    assert dict(normalizer.counts) == {"duplicate_record": 2, "chunk_gap": 1, "late_record": 1}
    assert frames.events["event_id"].to_list() == ["1", "3"]


def test_only_the_latest_ended_flows_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "_ENDED_MAX", 2)
    c = Capture()
    flows = [c.request("GET") for _ in range(3)]
    for f in flows:
        c.response(f, sse=True)
        c.chunk(f, "data: a\n\n", n=0)
        c.end(f)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert list(normalizer._ended) == flows[1:]  # bounded, the earliest forgotten
    normalizer.add_all([r for r in c.records if r["kind"] == "chunk" and r["flow"] == flows[2]])
    assert normalizer.counts["duplicate_record"] == 1  # a recent flow's record is still told


def test_replica_header_overrides_the_recorded_replica() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True, headers={"X-Served-By": "r2"}, replica="10.9.9.9:1")
    g = c.request("GET")
    c.response(g, sse=True, replica="10.9.9.9:1")
    flows = normalize_records(c.records, replica_header="x-served-by").flows
    assert flows.select("replica", "replica_source").rows() == [
        ("r2", "header"),
        ("10.9.9.9:1", "upstream"),
    ]


def test_payload_integers_past_int64_are_null_and_the_rows_kept() -> None:
    # A JSON-RPC error code and an SSE retry are the server's data: past Int64 they are
    # recorded as absent (the retry with a warning), the message and the event still are.
    c = Capture()
    f = c.request("GET", headers=H)
    c.response(f, sse=True)
    code = '{"jsonrpc":"2.0","id":1,"error":{"code":99999999999999999999999,"message":"m"}}'
    c.chunk(f, f"id: 1\nretry: 99999999999999999999999\ndata: {code}\n\n", n=0)
    c.chunk(f, "id: 2\nretry: 9223372036854775807\ndata: x\n\n", n=1)  # the Int64 maximum
    c.end(f)
    frames = normalize_records(c.records)
    assert frames.messages.select("kind", "rpc_id", "error_code").rows()[0] == ("error", "1", None)
    assert frames.events.select("event_id", "retry", "warnings").rows() == [
        ("1", None, ["retry-too-large"]),
        ("2", 2**63 - 1, []),
    ]
    assert frames.flows["last_retry_ms"].to_list() == [2**63 - 1]


def test_a_body_text_with_a_lone_surrogate_is_stored_as_its_bytes() -> None:
    # A leniently read capture line can hold one ("\udc00" in JSON): no UTF-8 text column can,
    # so the payload keeps the bytes the text stands for, as base64, under their hash.
    text = '{"jsonrpc":"2.0","id":1,"method":"a\udc00"}'
    c = Capture()
    f = c.request(body=req("ping", 1))
    c.records[-1]["body"] = {"text": text}
    c.response(f, body=res(1))
    c.end(f)
    frames = normalize_records(c.records)
    raw = text.encode("utf-8", "surrogatepass")
    body_hash = frames.flows["request_body_hash"].item()
    assert body_hash == N.bytes_hash(raw)
    stored = frames.payloads.filter(pl.col("data_hash") == body_hash).row(0, named=True)
    assert (stored["text"], stored["base64"]) == (base64.b64encode(raw).decode(), True)
    assert frames.messages.filter(pl.col("direction") == "c2s")["reason"].to_list() == ["not-utf8"]
