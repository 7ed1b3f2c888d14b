import json
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from analyzer.capture.recorder import Recorder, StreamTap, header_value, is_event_stream
from analyzer.capture.redaction import Redactor
from analyzer.records import RECORD_ADAPTER


class ListSink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.lines: list[bytes] = []
        self.redacted = 0

    def submit(self, record: dict[str, object]) -> None:
        self.records.append({"seq": len(self.records), **record})
        self.lines.append(to_json(record))  # as the writer serializes it

    def submit_encoded(self, members: list[bytes]) -> None:
        for m in members:
            self.records.append({"seq": len(self.records), **json.loads(b"{" + m)})
            self.lines.append(b"{" + m)

    def count_redacted(self, n: int) -> None:
        self.redacted += n


def make(replica_header: str | None = None, **kw: Any) -> tuple[Recorder, ListSink]:
    sink = ListSink()
    return Recorder(sink, Redactor(key=b"k" * 32), replica_header=replica_header, **kw), sink


def test_header_helpers() -> None:
    assert header_value([("X-A", "1"), ("x-a", "2")], "x-A") == "1"
    assert header_value([], "x") is None
    assert is_event_stream([("content-type", "Text/Event-Stream; charset=utf-8")])
    assert not is_event_stream([("content-type", "application/json")])


def test_request_and_response_records_validate_and_redact() -> None:
    rec, sink = make()
    rec.request(
        "f1",
        method="POST",
        scheme="http",
        authority="127.0.0.1:1",
        path="/mcp?access_token=abc",
        http_version="HTTP/1.1",
        headers=[("Authorization", "Bearer abc"), ("Mcp-Session-Id", "s1")],
        client="127.0.0.1:5",
        upstream="127.0.0.1:1",
        body=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"password":"pw"}}',
    )
    rec.response(
        "f1",
        status=200,
        http_version="HTTP/1.1",
        headers=[("Content-Type", "application/json")],
        upstream="127.0.0.1:1",
        body=b"\xff\xfe",
        streamed=False,
    )
    for r in sink.records:
        RECORD_ADAPTER.validate_python(r)
    req, resp = sink.records
    assert "abc" not in str(req) and "pw" not in str(req)
    assert ("Mcp-Session-Id", "s1") in req["headers"]
    assert sink.redacted == 3
    assert resp["body"] == {"b64": "//4="}
    assert (resp["replica"], resp["replica_source"]) == ("127.0.0.1:1", "upstream")


def test_replica_comes_from_the_named_header_when_present() -> None:
    rec, sink = make(replica_header="X-Served-By")
    for headers in ([("x-served-by", "replica-b")], []):
        rec.response(
            "f",
            status=200,
            http_version="HTTP/1.1",
            headers=headers,
            upstream="h:1",
            body=b"",
            streamed=False,
        )
    assert [(r["replica"], r["replica_source"]) for r in sink.records] == [
        ("replica-b", "header"),
        ("h:1", "upstream"),
    ]


def test_stream_tap_records_decoded_whole_events_and_the_tail() -> None:
    rec, sink = make()
    tap = rec.response(
        "f2",
        status=200,
        http_version="HTTP/1.1",
        headers=[("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip")],
        upstream=None,
        body=None,
        streamed=True,
    )
    assert tap is not None
    comp = zlib.compressobj(wbits=31)
    stream = b'id: 1\ndata: {"access_token":"t"}\n\nid: 2\ndata: x\n\nid: 3\ndata: part'
    for piece in (stream[:10], stream[10:40], stream[40:]):
        tap.feed(comp.compress(piece) + comp.flush(zlib.Z_SYNC_FLUSH))
    tap.end("server_closed", "server closed connection")
    tap.end("complete")  # a second end is ignored
    for r in sink.records:
        RECORD_ADAPTER.validate_python(r)
    chunks = [r for r in sink.records if r["kind"] == "chunk"]
    assert [c["n"] for c in chunks] == [0, 1, 2]
    assert chunks[0]["data"]["text"].startswith('id: 1\ndata: {"access_token":"[redacted:')
    assert chunks[1]["data"]["text"] == "id: 2\ndata: x\n\n"
    assert chunks[2]["data"]["text"] == "id: 3\ndata: part" and chunks[2]["unterminated"]
    assert all(c["content_encoding"] == "gzip" for c in chunks)
    end = sink.records[-1]
    assert (end["kind"], end["how"], end["error"]) == (
        "stream_end",
        "server_closed",
        "server closed connection",
    )


def test_a_body_over_the_cap_keeps_its_head() -> None:
    rec, sink = make(body_cap=4)
    rec.response(
        "f",
        status=200,
        http_version="HTTP/1.1",
        headers=[],
        upstream=None,
        body=b"abcdefgh",
        streamed=False,
    )
    assert sink.records[0]["body"] == {"text": "abcd", "truncated_bytes": 4}


def stream_tap(encoding: str | None = None, **kw: Any) -> tuple[StreamTap, ListSink]:
    rec, sink = make(**kw)
    headers = [("Content-Type", "text/event-stream")]
    if encoding:
        headers.append(("Content-Encoding", encoding))
    tap = rec.response(
        "flow-%1",
        status=200,
        http_version="HTTP/1.1",
        headers=headers,
        upstream=None,
        body=None,
        streamed=True,
    )
    assert tap is not None
    sink.records.clear()
    sink.lines.clear()
    return tap, sink


EVENT_PARTS = [
    b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
    b'"params":{"progressToken":7}}\n\n',
    b'data: {"password":"hunter2"}\n\n',  # a secret
    b'data: caf\xc3\xa9 \xe2\x80\xa8 \x7f \\ "q" \x01\t\n\n',  # non-ASCII, escapes
    b"data: \xff\xfe\n\n",  # not UTF-8
    b"data: crlf\r\n\r\n",
    b"data: cr only\r\r",
    b"data: half an ev",
    b"ent\n\n",
    b": comment\n\n",
    b"\n",
]


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.lists(st.sampled_from(EVENT_PARTS), min_size=1, max_size=3), max_size=12),
    redact=st.booleans(),
    decode_cap=st.sampled_from([64 << 20, 300]),
)
def test_feed_many_writes_the_bytes_that_feed_one_by_one_writes(
    chunks: list[list[bytes]], redact: bool, decode_cap: int
) -> None:
    raws = [b"".join(parts) for parts in chunks]
    monos = [1_000 + i for i in range(len(raws))]
    one, one_sink = stream_tap(decode_cap=decode_cap)
    many, many_sink = stream_tap(decode_cap=decode_cap)
    one.recorder.redactor._enabled = many.recorder.redactor._enabled = redact
    for raw, mono in zip(raws, monos, strict=True):
        one.feed(raw, (mono + 5_000, mono))
    many.feed_many(raws, monos, 5_000)
    one.end("complete", at=(9, 9))
    many.end("complete", at=(9, 9))
    assert many_sink.lines == one_sink.lines
    assert many_sink.redacted == one_sink.redacted
    for r in many_sink.records:
        RECORD_ADAPTER.validate_python(r)


def test_feed_many_takes_the_fast_path_only_where_it_is_exact() -> None:
    tap, sink = stream_tap()
    plain = EVENT_PARTS[0]
    raws = [plain, plain, b"data: half", b" done\n\n", plain, EVENT_PARTS[1], plain]
    tap.feed_many(raws, list(range(len(raws))), 100)
    texts = [r["data"]["text"] for r in sink.records]
    assert texts[:2] == [plain.decode()] * 2
    assert texts[2] == "data: half done\n\n"  # the split event waited for its end
    assert "hunter2" not in "".join(texts) and sink.redacted == 1
    assert [r["n"] for r in sink.records] == list(range(6))
    assert [r["ts_ns"] - r["mono_ns"] for r in sink.records] == [100] * 6


def test_feed_many_of_gzip_goes_through_the_decoder() -> None:
    tap, sink = stream_tap("gzip")
    comp = zlib.compressobj(wbits=31)
    events = [b"id: %d\ndata: x\n\n" % i for i in range(5)]
    raws = [comp.compress(e) + comp.flush(zlib.Z_SYNC_FLUSH) for e in events]
    tap.feed_many(raws, list(range(5)), 0)
    assert [r["data"]["text"].encode() for r in sink.records] == events
    assert all(r["content_encoding"] == "gzip" for r in sink.records)


def test_feed_many_marks_the_decode_cap_where_feed_does() -> None:
    plain = EVENT_PARTS[0]
    raws = [plain] * 4
    lines = []
    for many in (False, True):
        tap, sink = stream_tap(decode_cap=2 * len(plain))  # the cap is hit exactly
        if many:
            tap.feed_many(raws, [0] * 4, 0)
        else:
            for raw in raws:
                tap.feed(raw, (0, 0))
        lines.append(sink.lines)
        assert [r.get("decompress_capped", False) for r in sink.records] == [False, True]
    assert lines[0] == lines[1]
