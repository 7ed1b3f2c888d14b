import gzip
import zlib

import brotli
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.capture.framing import ContentDecoder, EventFramer

STREAM = (
    b"id: 1\ndata: one\n\n"
    b"id: 2\r\ndata: two\r\n\r\n"
    b": comment\rdata: three\r\r"
    b'id: 4\ndata: {"a":\n'
    b"data: 1}\n\n"
)
EVENTS = [
    b"id: 1\ndata: one\n\n",
    b"id: 2\r\ndata: two\r\n\r\n",
    b": comment\rdata: three\r\r",
    b'id: 4\ndata: {"a":\ndata: 1}\n\n',
]


def test_framer_cuts_at_every_event_boundary_when_fed_whole_events() -> None:
    framer = EventFramer()
    assert [framer.feed(e) for e in EVENTS] == EVENTS
    assert framer.flush() == b""


def test_framer_holds_an_incomplete_event_until_its_blank_line() -> None:
    framer = EventFramer()
    assert framer.feed(b"id: 1\ndata: o") == b""
    assert framer.feed(b"ne\n") == b""
    assert framer.feed(b"\nid: 2\n") == b"id: 1\ndata: one\n\n"
    assert framer.flush() == b"id: 2\n"


def test_framer_does_not_take_a_split_crlf_for_two_line_ends() -> None:
    framer = EventFramer()
    # "\r" then "\n" is one CRLF: no blank line yet.
    assert framer.feed(b"data: x\r") == b""
    assert framer.feed(b"\n") == b""
    assert framer.feed(b"\r\n") == b"data: x\r\n\r\n"


def test_framer_releases_an_oversized_event_at_the_cap() -> None:
    framer = EventFramer(cap=16)
    assert framer.feed(b"data: " + b"x" * 20) == b"data: " + b"x" * 20
    assert framer.pending == 0


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=8))
def test_any_chunking_records_the_same_bytes_and_ends_on_boundaries(cuts: list[int]) -> None:
    framer = EventFramer()
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    out = [framer.feed(p) for p in pieces]
    assert b"".join(out) + framer.flush() == STREAM
    for chunk in filter(None, out):
        assert chunk.endswith((b"\n\n", b"\r\n\r\n", b"\r\r", b"\n\r\n", b"\r\n\n", b"\n\r"))


def _gzip_stream(parts: list[bytes]) -> list[bytes]:
    comp = zlib.compressobj(wbits=31)
    out = [comp.compress(p) + comp.flush(zlib.Z_SYNC_FLUSH) for p in parts]
    out[-1] += comp.flush()
    return out


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", _gzip_stream),
        ("deflate", lambda parts: [zlib.compress(b"".join(parts))]),
        ("deflate", lambda parts: [zlib.compress(b"".join(parts), wbits=-15)]),
        ("br", lambda parts: [brotli.compress(b"".join(parts))]),
        ("identity", lambda parts: parts),
        (None, lambda parts: parts),
    ],
)
def test_decoder_undoes_content_encoding_incrementally(encoding, encode) -> None:  # type: ignore[no-untyped-def]
    decoder = ContentDecoder(encoding)
    raw = encode(EVENTS)
    assert b"".join(decoder.decode(r) for r in raw) == STREAM
    assert not decoder.failed and not decoder.capped


def test_decoder_stops_at_the_cap_and_says_so() -> None:
    decoder = ContentDecoder("gzip", cap=100)
    out = decoder.decode(gzip.compress(b"x" * 10_000))
    assert out == b"x" * 100
    assert decoder.capped
    assert decoder.decode(gzip.compress(b"y")) == b""


def test_decoder_reports_garbage_and_unknown_encodings() -> None:
    bad = ContentDecoder("gzip")
    assert bad.decode(b"not gzip at all") == b""
    assert bad.failed and "content decoding failed" in bad.failed
    assert ContentDecoder("compress").failed == "unsupported content-encoding: compress"
