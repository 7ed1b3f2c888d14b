import gzip
import struct
import sys
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy.net import encoding

from analyzer.capture.framing import ContentDecoder, EventFramer, Piece, count_events
from tests.support.memory import traced_peak

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


def fed(framer: EventFramer, data: bytes) -> bytes:
    """What `feed` hands out to record, joined (no piece withheld anything)."""
    pieces = framer.feed(data)
    assert all(p.withheld == 0 for p in pieces)
    return b"".join(p.data for p in pieces)


def test_framer_cuts_at_every_event_boundary_when_fed_whole_events() -> None:
    framer = EventFramer()
    assert [fed(framer, e) for e in EVENTS] == EVENTS
    assert framer.flush() == Piece(b"")


def test_framer_holds_an_incomplete_event_until_its_blank_line() -> None:
    framer = EventFramer()
    assert fed(framer, b"id: 1\ndata: o") == b""
    assert fed(framer, b"ne\n") == b""
    assert fed(framer, b"\nid: 2\n") == b"id: 1\ndata: one\n\n"
    assert framer.flush() == Piece(b"id: 2\n")


def test_framer_does_not_take_a_split_crlf_for_two_line_ends() -> None:
    framer = EventFramer()
    # "\r" then "\n" is one CRLF: no blank line yet.
    assert fed(framer, b"data: x\r") == b""
    assert fed(framer, b"\n") == b""
    assert fed(framer, b"\r\n") == b"data: x\r\n\r\n"


def test_framer_releases_an_oversized_event_at_the_cap() -> None:
    framer = EventFramer(cap=16)
    assert fed(framer, b"data: " + b"x" * 20) == b"data: " + b"x" * 20
    assert framer.pending == 0


# No deadline: a loaded machine may take over 200 ms an example; the bytes are what is checked.
@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=8))
def test_any_chunking_records_the_same_bytes_and_ends_on_boundaries(cuts: list[int]) -> None:
    framer = EventFramer()
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    out = [fed(framer, p) for p in pieces]
    assert b"".join(out) + framer.flush().data == STREAM
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
        ("zstd", lambda parts: [encoding.encode(b"".join(parts), "zstd")]),
        ("deflateraw", lambda parts: [zlib.compress(b"".join(parts), wbits=-15)]),
        ("identity", lambda parts: parts),
        ("none", lambda parts: parts),
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


def test_decoder_reads_every_gzip_member_across_chunks_and_padding() -> None:
    # RFC 1952 §2.2: a gzip body is a series of members; a streaming server may send each
    # event as its own member, and pad with zero bytes as gzip(1) allows.
    decoder = ContentDecoder("gzip")
    members = [gzip.compress(e) for e in EVENTS]
    raw = [members[0], members[1] + b"\0\0" + members[2][:7], members[2][7:] + members[3]]
    assert b"".join(decoder.decode(r) for r in raw) == STREAM
    assert decoder.failed is None


def test_decoder_keeps_the_output_before_garbage_after_a_gzip_member() -> None:
    decoder = ContentDecoder("gzip")
    assert decoder.decode(gzip.compress(EVENTS[0]) + b"junk") == EVENTS[0]
    assert decoder.failed is not None
    assert "4 bytes after a gzip member" in decoder.failed


@pytest.mark.parametrize(
    ("encoding", "stream"),
    [
        ("deflate", zlib.compress(EVENTS[0])),
        ("deflate", zlib.compress(EVENTS[0], wbits=-15)),
        ("br", brotli.compress(EVENTS[0])),
    ],
)
def test_decoder_reports_bytes_after_a_finished_stream(encoding: str, stream: bytes) -> None:
    decoder = ContentDecoder(encoding)
    assert decoder.decode(stream) == EVENTS[0]
    assert decoder.decode(b"trailing") == b""
    assert decoder.failed == (
        f"content decoding failed: 8 bytes after the end of the {encoding} stream"
    )


def test_decoder_cap_holds_across_gzip_members() -> None:
    decoder = ContentDecoder("gzip", cap=100)
    out = decoder.decode(gzip.compress(b"x" * 60) + gzip.compress(b"y" * 60))
    assert out == b"x" * 60 + b"y" * 40
    assert decoder.capped


def test_a_withholding_framer_keeps_the_head_and_counts_the_rest() -> None:
    framer = EventFramer(cap=16, withhold=True)
    event = b"data: " + b"x" * 30 + b"\n\n"
    assert framer.feed(event[:20]) == []
    assert framer.feed(event[20:34]) == []  # nothing past the head is handed out
    assert framer.feed(event[34:] + EVENTS[0]) == [
        Piece(b"data: " + b"x" * 10, 20),
        Piece(b"\n\n" + EVENTS[0]),
    ]
    assert framer.pending == 0


@pytest.mark.parametrize("split", [1, 2])
def test_a_withholding_framer_finds_a_crlf_boundary_split_across_chunks(split: int) -> None:
    framer = EventFramer(cap=8, withhold=True)
    event = b"data: " + b"z" * 12 + b"\r\n\r\n"
    tail = event[-4:]
    assert framer.feed(event[:-4] + tail[:split]) == []
    got = framer.feed(tail[split:] + b"data: ok\n\n")
    assert got[0] == Piece(b"data: zz", 10)
    assert b"".join(p.data for p in got[1:]) == b"\r\n\r\ndata: ok\n\n"


def test_a_withholding_framer_flushes_a_cut_tail_with_its_count() -> None:
    framer = EventFramer(cap=8, withhold=True)
    assert framer.feed("data: €é and more".encode()) == []
    # The head stops before a split UTF-8 sequence; the rest is withheld.
    assert framer.flush() == Piece(b"data: ", len("€é and more".encode()))
    assert framer.pending == 0
    # Only an event that is still incomplete at the cap is cut: one that ends in the same
    # chunk goes whole, whatever its size.
    event = b"data: " + b"w" * 30 + b"\r\n\r\n"
    assert framer.feed(event[:-1]) == [Piece(event[:-1])]  # "\r\n\r" ends it already
    assert framer.feed(event[-1:] + EVENTS[0]) == [Piece(event[-1:] + EVENTS[0])]


def _zstd_frames(parts: list[bytes]) -> bytes:
    """One zstd frame per part, a skippable frame (RFC 8878 §3.1.2) between the first two."""
    frames = [encoding.encode(p, "zstd") for p in parts]
    skippable = struct.pack("<II", 0x184D2A50, 5) + b"skip!"
    return frames[0] + skippable + b"".join(frames[1:])


@pytest.mark.parametrize("step", [1, 7, 1 << 16])
def test_decoder_reads_every_zstd_frame_across_chunks(step: int) -> None:
    raw = _zstd_frames(EVENTS)
    assert encoding.decode(raw, "zstd") == STREAM  # as mitmproxy decodes it
    decoder = ContentDecoder("zstd")
    out = b"".join(decoder.decode(raw[i : i + step]) for i in range(0, len(raw), step))
    assert out == STREAM
    assert decoder.failed is None and decoder.ended


def test_decoder_keeps_the_output_before_garbage_after_a_zstd_frame() -> None:
    decoder = ContentDecoder("zstd")
    assert decoder.decode(encoding.encode(EVENTS[0], "zstd") + b"junk") == EVENTS[0]
    assert decoder.failed is not None
    assert "4 bytes after a zstd frame are not another frame" in decoder.failed


def _bomb(encoding_name: str, size: int) -> bytes:
    """`size` zero bytes, compressed a MiB at a time (the input is never whole in memory)."""
    block = bytes(1 << 20)
    if encoding_name == "br":
        br = brotli.Compressor(quality=5)
        return b"".join(br.process(block) for _ in range(size >> 20)) + br.finish()
    if sys.version_info >= (3, 14):  # pragma: no cover
        from compression import zstd
    else:
        from backports import zstd
    zs = zstd.ZstdCompressor(level=3)
    return b"".join(zs.compress(block) for _ in range(size >> 20)) + zs.flush()


@pytest.mark.parametrize("encoding_name", ["br", "zstd"])
def test_one_bomb_chunk_inflates_no_further_than_the_cap(encoding_name: str) -> None:
    # 128 MiB of zeros is a few hundred bytes of br: one chunk. The decoder must stop at the
    # cap inside that chunk, not inflate it whole and cut afterwards.
    raw = _bomb(encoding_name, 128 << 20)
    assert len(raw) < 8192
    decoder = ContentDecoder(encoding_name, cap=1 << 20)
    out, peak = traced_peak(lambda: decoder.decode(raw))
    assert peak < 8 << 20, f"decoding took {peak} bytes at its peak"
    assert out == bytes(1 << 20)
    assert decoder.capped and decoder.produced == 1 << 20 and decoder.failed is None
    assert decoder.decode(raw) == b""


# -- several codings (RFC 9110 §8.4: listed in the order applied, undone in reverse) -------

CODINGS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda data: encoding.encode(data, "zstd"),
}


@pytest.mark.parametrize("step", [1, 7, 1 << 16])
@pytest.mark.parametrize("first", list(CODINGS))
@pytest.mark.parametrize("second", list(CODINGS))
def test_decoder_undoes_two_codings_in_reverse_order(first: str, second: str, step: int) -> None:
    raw = CODINGS[second](CODINGS[first](STREAM))
    decoder = ContentDecoder(f"{first}, {second}")
    assert decoder.encoding == f"{first}, {second}"
    out = b"".join(decoder.decode(raw[i : i + step]) for i in range(0, len(raw), step))
    assert out == STREAM
    assert decoder.ended and decoder.produced == len(STREAM)
    assert decoder.failed is None and not decoder.capped


def test_decoder_reads_a_list_loosely_and_drops_identity() -> None:
    decoder = ContentDecoder(" Identity , GZIP,")
    assert decoder.encoding == "gzip"  # one coding: decoded as "gzip" alone is
    assert decoder.decode(gzip.compress(STREAM)) == STREAM
    decoder = ContentDecoder("gzip ,identity,  BR")
    assert decoder.decode(brotli.compress(gzip.compress(STREAM))) == STREAM
    assert ContentDecoder("identity, none").encoding == "identity"


def test_decoder_fails_on_an_unknown_coding_anywhere_in_a_list() -> None:
    for header in ("gzip, compress", "compress, gzip"):
        decoder = ContentDecoder(header)
        assert decoder.failed == f"unsupported content-encoding: compress (in {header})"
        assert decoder.decode(gzip.compress(STREAM)) == b""


def test_decoder_names_the_coding_that_failed_in_a_chain() -> None:
    # br undone first, fine; what it gives is not gzip.
    decoder = ContentDecoder("gzip, br")
    assert decoder.decode(brotli.compress(b"not gzip at all")) == b""
    assert decoder.failed is not None
    assert decoder.failed.startswith("content decoding failed: ")
    assert decoder.failed.endswith("(undoing gzip of gzip, br)")
    # Bytes after the br stream: the output before them is kept, the br stage says so.
    decoder = ContentDecoder("gzip, br")
    assert decoder.decode(brotli.compress(gzip.compress(STREAM))) == STREAM
    assert decoder.ended
    assert decoder.decode(b"trailing") == b""
    assert decoder.failed == (
        "content decoding failed: 8 bytes after the end of the br stream (undoing br of gzip, br)"
    )


def _stored_gzip_bomb(size: int) -> bytes:
    """`size` zero bytes as gzip without compression (level 0), then br: only br inflates."""
    block = bytes(1 << 20)
    gz = zlib.compressobj(0, zlib.DEFLATED, 31)
    br = brotli.Compressor(quality=5)
    parts = [br.process(gz.compress(block)) for _ in range(size >> 20)]
    return b"".join(parts) + br.process(gz.flush()) + br.finish()


@pytest.mark.parametrize("bomb_in", ["gzip, applied first", "br, applied last"])
def test_a_bomb_at_either_stage_of_a_chain_inflates_no_further_than_the_cap(
    bomb_in: str,
) -> None:
    cap = 1 << 20
    if bomb_in == "gzip, applied first":
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = b"".join(gz.compress(bytes(1 << 20)) for _ in range(128)) + gz.flush()
        raw = brotli.compress(zeros)  # br gives ~128 KiB of gzip, which gives 128 MiB
    else:
        raw = _stored_gzip_bomb(64 << 20)  # br gives 64 MiB (of stored gzip)
    assert len(raw) < 1 << 20
    decoder = ContentDecoder("gzip, br", cap=cap)
    out, peak = traced_peak(lambda: decoder.decode(raw))
    assert peak < 8 * cap, f"decoding took {peak} bytes at its peak"
    assert decoder.capped and decoder.failed is None
    # The gzip stage gets at most the cap of stored gzip: a little less than the cap out.
    assert cap - 1024 < len(out) <= cap and out == bytes(len(out))
    assert decoder.produced == len(out)
    assert decoder.decode(raw) == b""


# -- "deflate" that is raw DEFLATE, its first chunk too small to tell ------------------------


@pytest.mark.parametrize("first", [1, 2, 3])
def test_raw_deflate_is_decoded_whatever_the_size_of_its_first_chunk(first: int) -> None:
    raw = zlib.compress(STREAM, wbits=-15)
    decoder = ContentDecoder("deflate")
    assert decoder.decode(raw[:first]) + decoder.decode(raw[first:]) == STREAM
    assert decoder.failed is None and decoder.ended


def test_raw_deflate_fed_a_byte_at_a_time_is_decoded() -> None:
    raw = zlib.compress(STREAM, wbits=-15)
    decoder = ContentDecoder("deflate")
    assert b"".join(decoder.decode(raw[i : i + 1]) for i in range(len(raw))) == STREAM
    assert decoder.failed is None and decoder.ended


@pytest.mark.parametrize(
    ("data", "events"),
    [
        ("data: a\n\n", 1),
        (b"id: 1\ndata: a\n\nid: 2\ndata: b\n\n", 2),
        ("data: a\r\n\r\ndata: b\r\n\r\n", 2),
        ("data: a\r\rdata: b\r\r", 2),
        ("data: a\ndata: b\n", 0),  # not completed yet
        (b"", 0),
    ],
)
def test_count_events_counts_the_blank_lines_that_end_events(
    data: str | bytes, events: int
) -> None:
    assert count_events(data) == events
