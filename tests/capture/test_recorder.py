import gzip
import json
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from analyzer.capture.recorder import Recorder, StreamTap, header_value, is_event_stream
from analyzer.capture.redaction import Redactor
from analyzer.record_models import RECORD_ADAPTER
from analyzer.sse import decode_all
from tests.support.examples import examples


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


def plain_response(rec: Recorder, body: bytes, **extra: Any) -> None:
    """A non-streamed 200 of `body` (`extra`: more arguments of `Recorder.response`)."""
    rec.response(
        "f", status=200, http_version="HTTP/1.1", headers=[], upstream=None, body=body,
        streamed=False, **extra,
    )  # fmt: skip


def test_a_body_over_the_cap_keeps_its_head() -> None:
    rec, sink = make(body_cap=4)
    plain_response(rec, b"abcdefgh")
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


@settings(max_examples=examples(300), deadline=None)
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


def big_event(size: int, secret_at: int) -> bytes:
    """One SSE event of about `size` bytes whose password value starts at `secret_at`."""
    head = b'id: 7\ndata: {"jsonrpc":"2.0","method":"x","params":{"s":"'
    key = b'","password":"'
    pad = secret_at - len(head) - len(key)
    tail = b'","z":"' + b"d" * (size - secret_at) + b'"}}\n\n'
    return head + b"c" * pad + key + b"HEADHEAD" + b"TAILSECRET" + tail


def test_a_secret_straddling_the_cut_of_an_oversized_event_never_reaches_a_record() -> None:
    event = big_event(300, secret_at=96)  # the cut at 100 falls inside the secret
    tap, sink = stream_tap(redacted_event_cap=100)
    stream = event + b"id: 8\ndata: after\n\n"
    for i in range(0, len(stream), 16):
        tap.feed(stream[i : i + 16], (0, 0))
    tap.end("complete", at=(0, 0))
    for r in sink.records:
        RECORD_ADAPTER.validate_python(r)
    blob = b"".join(sink.lines)
    assert b"HEAD" not in blob and b"SECRET" not in blob and b"ddd" not in blob
    head, *rest = [r for r in sink.records if r["kind"] == "chunk"]
    assert head["data"]["text"].startswith('id: 7\ndata: {"jsonrpc"')
    assert head["data"]["text"].endswith('"password":"[redacted:' + head["data"]["text"][-9:])
    # The capture says how much of the event it withheld (all but the head's 100 bytes and
    # the blank line), and the stream still parses.
    assert head["data"]["truncated_bytes"] == len(event) - 2 - 100
    assert all("truncated_bytes" not in r["data"] for r in rest)
    assert "".join(r["data"]["text"] for r in rest) == "\n\nid: 8\ndata: after\n\n"
    recorded = "".join(r["data"]["text"] for r in (head, *rest)).encode()
    assert [e.id for e in decode_all(recorded)] == ["7", "8"]


def test_an_oversized_event_cut_at_stream_end_is_an_unterminated_truncated_tail() -> None:
    event = big_event(300, secret_at=96)
    tap, sink = stream_tap(redacted_event_cap=100)
    tap.feed(event[:200], (0, 0))
    tap.end("server_closed", at=(0, 0))
    (tail,) = [r for r in sink.records if r["kind"] == "chunk"]
    assert tail["unterminated"] and tail["data"]["truncated_bytes"] == 100
    assert b"SECRET" not in b"".join(sink.lines)


def test_redacting_an_event_past_the_plain_cap_is_recorded_whole() -> None:
    event = big_event(300, secret_at=96)
    tap, sink = stream_tap(event_cap=100)  # the redacted cap (8 MiB) applies
    for i in range(0, len(event), 16):
        tap.feed(event[i : i + 16], (0, 0))
    (chunk,) = sink.records
    assert "truncated_bytes" not in chunk["data"]
    assert chunk["data"]["text"].endswith('"}}\n\n') and "SECRET" not in chunk["data"]["text"]


def test_only_a_redacting_capture_withholds_part_of_an_oversized_event() -> None:
    event = big_event(300, secret_at=96)
    tap, redacting = stream_tap(redacted_event_cap=100)
    for i in range(0, len(event), 16):
        tap.feed(event[i : i + 16], (0, 0))
    head, end = redacting.records
    assert head["data"]["truncated_bytes"] == len(event) - 102
    assert end["data"] == {"text": "\n\n"}
    # Without redaction nothing is withheld: the event is recorded in pieces, every byte.
    sink = ListSink()
    rec = Recorder(sink, Redactor(enabled=False), event_cap=100)
    tap = rec.response(
        "f",
        status=200,
        http_version="HTTP/1.1",
        headers=[("Content-Type", "text/event-stream")],
        upstream=None,
        body=None,
        streamed=True,
    )
    assert tap is not None
    event = big_event(300, secret_at=96)
    for i in range(0, len(event), 16):
        tap.feed(event[i : i + 16], (0, 0))
    chunks = [r for r in sink.records if r["kind"] == "chunk"]
    assert len(chunks) > 1
    assert b"".join(c["data"]["text"].encode() for c in chunks) == event


def test_a_stream_of_gzip_members_records_every_event() -> None:
    tap, sink = stream_tap("gzip")
    events = [b"id: %d\ndata: x\n\n" % i for i in range(3)]
    tap.feed_many([gzip.compress(e) for e in events], [0, 1, 2], 0)
    tap.end("complete", at=(0, 0))
    assert [r["data"]["text"].encode() for r in sink.records if r["kind"] == "chunk"] == events
    assert sink.records[-1]["error"] is None


def test_garbage_after_a_deflate_stream_is_reported_at_stream_end() -> None:
    tap, sink = stream_tap("deflate")
    tap.feed(zlib.compress(b"id: 1\ndata: x\n\n") + b"garbage", (0, 0))
    tap.end("complete", at=(0, 0))
    chunk, end = sink.records
    assert chunk["data"]["text"] == "id: 1\ndata: x\n\n"
    assert end["error"] == "content decoding failed: 7 bytes after the end of the deflate stream"


def test_a_decoding_failure_is_kept_beside_a_transport_error() -> None:
    tap, sink = stream_tap("deflate")
    tap.feed(zlib.compress(b"id: 1\ndata: x\n\n") + b"garbage", (0, 0))
    tap.end("server_closed", "peer closed connection", at=(0, 0))
    assert sink.records[-1]["error"] == (
        "peer closed connection; "
        "content decoding failed: 7 bytes after the end of the deflate stream"
    )


def test_body_bytes_the_proxy_did_not_keep_add_to_truncated_bytes() -> None:
    rec, sink = make(body_cap=4)
    for body, dropped in ((b"abcdefgh", 100), (b"ab", 100)):
        plain_response(rec, body, body_dropped=dropped)
    first, second = (r["body"] for r in sink.records)
    assert first == {"text": "abcd", "truncated_bytes": 104}
    assert second == {"text": "ab", "truncated_bytes": 100}
