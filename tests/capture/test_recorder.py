import zlib
from typing import Any

from analyzer.capture.recorder import Recorder, header_value, is_event_stream
from analyzer.capture.redaction import Redactor
from analyzer.records import RECORD_ADAPTER


class ListSink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.redacted = 0

    def submit(self, record: dict[str, object]) -> None:
        self.records.append({"seq": len(self.records), **record})

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
