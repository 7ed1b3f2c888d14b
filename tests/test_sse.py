"""Tests for analyzer.sse: WHATWG and web-platform-tests vectors, MCP shapes, chunking."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.sse import SseDecoder, SseEvent, decode_all
from tests.support.examples import examples


def ev(
    data: str = "",
    *,
    id: str | None = None,
    last: str = "",
    event: str = "message",
    retry: int | None = None,
    comments: int = 0,
    warnings: tuple[str, ...] = (),
) -> SseEvent:
    """An expected event; `id_only` follows from `data` as the decoder defines it."""
    return SseEvent(
        id=id,
        last_event_id=last,
        event=event,
        data=data,
        retry=retry,
        id_only=data == "",
        comments=comments,
        warnings=warnings,
    )


def decode_in_one(stream: bytes) -> tuple[list[SseEvent], bytes]:
    decoder = SseDecoder()
    events = decoder.feed(stream) + decoder.flush()
    return events, decoder.tail


def decode_chunked(chunks: list[bytes]) -> tuple[list[SseEvent], bytes]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.flush()
    return events, decoder.tail


def wpt_message(message: bytes, *, newline: bool = True) -> bytes:
    """The body wpt's eventsource/resources/message.py sends for `message`."""
    return message + (b"\n\n" if newline else b"") + b"\n"


LONG = b"x" * 2048

# (input, expected events, expected tail after flush)
VECTORS: dict[str, tuple[bytes, list[SseEvent], bytes]] = {
    # --- WHATWG HTML 9.2.6 examples -------------------------------------------------------
    "whatwg-two-messages-and-multiline": (
        b"data: This is the first message.\n\n"
        b"data: This is the second message, it\n"
        b"data: has two lines.\n\n"
        b"data: This is the third message.\n\n",
        [
            ev("This is the first message."),
            ev("This is the second message, it\nhas two lines."),
            ev("This is the third message."),
        ],
        b"",
    ),
    "whatwg-stocks-event-types": (
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
        [
            ev("73857293", event="add"),
            ev("2153", event="remove"),
            ev("113411", event="add"),
        ],
        b"",
    ),
    "whatwg-yhoo-data-lines": (
        b"data: YHOO\ndata: +2\ndata: 10\n\n",
        [ev("YHOO\n+2\n10")],
        b"",
    ),
    "whatwg-comment-id-set-and-reset": (
        b": test stream\n\n"
        b"data: first event\nid: 1\n\n"
        b"data:second event\nid\n\n"
        b"data:  third event\n\n",
        [
            ev("first event", id="1", last="1"),
            ev("second event", id="", last=""),
            ev(" third event"),
        ],
        b"",
    ),
    "whatwg-empty-data-and-unterminated-last": (
        b"data\n\ndata\ndata\n\ndata:",
        [ev(""), ev("\n")],
        b"data:",
    ),
    "whatwg-colon-space-optional": (
        b"data:test\n\ndata: test\n\n",
        [ev("test"), ev("test")],
        b"",
    ),
    # --- web-platform-tests eventsource/format-*.any.js --------------------------------------
    "wpt-format-bom": (
        wpt_message(b"\xef\xbb\xbfdata:1\n\n\xef\xbb\xbfdata:2\n\ndata:3"),
        [ev("1"), ev("", warnings=("unknown-field:\ufeffdata",)), ev("3")],
        b"",
    ),
    "wpt-format-bom-2-second-bom-is-a-field-name": (
        wpt_message(b"\xef\xbb\xbf\xef\xbb\xbfdata:1\n\ndata:2\n\ndata:3"),
        [ev("", warnings=("unknown-field:\ufeffdata",)), ev("2"), ev("3")],
        b"",
    ),
    "wpt-format-comments": (
        wpt_message(
            b"data:1\r:\x00\n:\r\ndata:2\n:"
            + LONG
            + b"\rdata:3\n:data:fail\r:"
            + LONG
            + b"\ndata:4\n",
            newline=False,
        ),
        [ev("1\n2\n3\n4", comments=5)],
        b"",
    ),
    "wpt-format-data-before-final-empty-line": (
        wpt_message(b"retry:1000\ndata:test1\n\nid:test\ndata:test2", newline=False),
        [ev("test1", retry=1000)],
        b"id:test\ndata:test2\n",
    ),
    "wpt-format-field-data": (
        wpt_message(b"data:\n\ndata\ndata\n\ndata:test"),
        [ev(""), ev("\n"), ev("test")],
        b"",
    ),
    "wpt-format-field-event-empty": (
        wpt_message(b"event: \ndata:data"),
        [ev("data")],
        b"",
    ),
    "wpt-format-field-event": (
        wpt_message(b"event:test\ndata:x\n\ndata:x"),
        [ev("x", event="test"), ev("x")],
        b"",
    ),
    "wpt-format-field-id-non-ascii": (
        "id: \u2026\nretry: 200\ndata: hello\n\n".encode(),
        [ev("hello", id="\u2026", last="\u2026", retry=200)],
        b"",
    ),
    **{
        f"wpt-format-field-id-null-{n}": (
            b"id: " + value + b"\nretry: 200\ndata: hello\n\n",
            [ev("hello", retry=200, warnings=("id-contains-nul",))],
            b"",
        )
        for n, value in enumerate([b"\x00\x00", b"x\x00", b"\x00x", b"x\x00x", b" \x00"])
    },
    "wpt-format-field-id-3-persists": (
        b"id: 1\ndata: 1\n\ndata: 2\n\nid: 2\ndata:3\n\ndata:4\n\n",
        [
            ev("1", id="1", last="1"),
            ev("2", last="1"),
            ev("3", id="2", last="2"),
            ev("4", last="2"),
        ],
        b"",
    ),
    "wpt-format-field-id-3-resets": (
        b"id: 1\ndata: 1\n\nid:\ndata:2\n\nid\ndata:3\n\n",
        [ev("1", id="1", last="1"), ev("2", id=""), ev("3", id="")],
        b"",
    ),
    "wpt-format-field-parsing": (
        wpt_message(
            b"data:\x00\ndata:  2\rData:1\ndata\x00:2\ndata:1\r\x00data:4\nda-ta:3\rdata_5\n"
            b"data:3\rdata:\r\n data:32\ndata:4\n",
            newline=False,
        ),
        [
            ev(
                "\x00\n 2\n1\n3\n\n4",
                warnings=(
                    "unknown-field:Data",
                    "unknown-field:data\x00",
                    "unknown-field:\x00data",
                    "unknown-field:da-ta",
                    "unknown-field:data_5",
                    "unknown-field: data",
                ),
            )
        ],
        b"",
    ),
    "wpt-format-field-retry-leading-zero-is-decimal": (
        wpt_message(b"retry:03000\ndata:x"),
        [ev("x", retry=3000)],
        b"",
    ),
    "wpt-format-field-retry-bogus": (
        wpt_message(b"retry:3000\nretry:1000x\ndata:x"),
        [ev("x", retry=3000, warnings=("invalid-retry",))],
        b"",
    ),
    "wpt-format-field-retry-empty": (
        wpt_message(b"retry\ndata:test"),
        [ev("test", warnings=("invalid-retry",))],
        b"",
    ),
    "wpt-format-field-unknown": (
        wpt_message(
            b"data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test"
        ),
        [
            ev(
                "test\n\ntest",
                comments=1,
                warnings=(
                    "unknown-field: data",
                    "unknown-field:foobar",
                    "unknown-field:justsometext",
                ),
            )
        ],
        b"",
    ),
    "wpt-format-leading-space-only-one-removed": (
        wpt_message(b"data:\ttest\rdata: \ndata:test"),
        [ev("\ttest\n\ntest")],
        b"",
    ),
    "wpt-format-newlines": (
        wpt_message(b"data:test\r\ndata\ndata:test\r\n\r", newline=False),
        [ev("test\n\ntest")],
        b"",
    ),
    "wpt-format-null-character": (
        wpt_message(b"data:\x00\n\n"),
        [ev("\x00")],
        b"",
    ),
    "wpt-format-utf-8": (
        wpt_message("data:ok\u2026".encode()),
        [ev("ok\u2026")],
        b"",
    ),
    "wpt-event-data-message2": (
        b"data:msg\ndata: msg\n\n:\nfalsefield:msg\n\nfalsefield:msg\nData:data\n\n"
        b"data\n\ndata:end\n\n",
        [
            ev("msg\nmsg"),
            # Blocks a browser would not dispatch (empty data buffer), returned all the same.
            ev("", comments=1, warnings=("unknown-field:falsefield",)),
            ev("", warnings=("unknown-field:falsefield", "unknown-field:Data")),
            ev(""),
            ev("end"),
        ],
        b"",
    ),
    # --- line ends, fields, anomalies --------------------------------------------------------
    "cr-only": (
        b"data: a\rdata: b\r\rid: 1\r\r",
        [ev("a\nb"), ev("", id="1", last="1")],
        b"",
    ),
    "crlf-only": (
        b"event: e\r\ndata: a\r\n\r\ndata: b\r\n\r\n",
        [ev("a", event="e"), ev("b")],
        b"",
    ),
    "mixed-line-ends": (
        b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r\n",
        [ev("a\nb\nc"), ev("d")],
        b"",
    ),
    "cr-cr-is-two-line-ends-lf-cr-too": (
        b"data: a\r\rdata: b\n\rdata: c\n\n",
        [ev("a"), ev("b"), ev("c")],
        b"",
    ),
    "only-cr-lf-end-lines-not-unicode-separators": (
        "data: a\u2028b\x85c\x0bd\x0ce\x1cf\n\n".encode(),
        [ev("a\u2028b\x85c\x0bd\x0ce\x1cf")],
        b"",
    ),
    "field-name-with-space-before-colon": (
        b"data : x\n\n",
        [ev("", warnings=("unknown-field:data ",))],
        b"",
    ),
    "field-value-keeps-later-colons": (
        b'data: {"a": "b:c"}\nevent: x:y\n\n',
        [ev('{"a": "b:c"}', event="x:y")],
        b"",
    ),
    "comment-only-blocks-are-dropped": (
        b":ping\n\n: keep-alive\n:\n\n\n\ndata: x\n\n",
        [ev("x")],
        b"",
    ),
    "comment-counted-in-a-block-with-fields": (
        b": one\ndata: x\n: two\n\n",
        [ev("x", comments=2)],
        b"",
    ),
    "last-id-in-block-wins": (
        b"id: a\nid: b\n\n",
        [ev("", id="b", last="b")],
        b"",
    ),
    "id-with-nul-keeps-previous-buffer": (
        b"id: 7\n\nid: 8\x00\ndata: x\n\n",
        [ev("", id="7", last="7"), ev("x", last="7", warnings=("id-contains-nul",))],
        b"",
    ),
    "id-with-nul-after-valid-id-in-same-block": (
        b"id: a\nid: \x00\n\n",
        [ev("", id="a", last="a", warnings=("id-contains-nul",))],
        b"",
    ),
    "retry-not-ascii-digits": (
        "retry: 1a\n\nretry: \u0663\n\nretry: -1\n\nretry:  10\n\nretry: 1.5\n\n".encode(),
        [ev(warnings=("invalid-retry",))] * 5,
        b"",
    ),
    "retry-huge-digit-string": (
        b"retry: " + b"9" * 5000 + b"\n\n",
        [ev(warnings=("retry-too-large",))],
        b"",
    ),
    "event-reset-after-block": (
        b"event: a\n\ndata: x\n\n",
        [ev("", event="a"), ev("x")],
        b"",
    ),
    "non-utf8-bytes-replaced": (
        b"data: a\xffb\n\ndata: \xe2\x80\n\ndata: \xf0\x9f\x98A\n\n",
        [
            ev("a\ufffdb", warnings=("invalid-utf8",)),
            ev("\ufffd", warnings=("invalid-utf8",)),
            ev("\ufffdA", warnings=("invalid-utf8",)),
        ],
        b"",
    ),
    "literal-replacement-character-is-not-a-warning": (
        "data: \ufffd\n\n".encode(),
        [ev("\ufffd")],
        b"",
    ),
    "invalid-utf8-in-comment-of-dropped-block": (
        b":\xff\n\ndata: x\n\n",
        [ev("x")],
        b"",
    ),
    "long-unknown-field-name-cut-in-warning": (
        b"y" * 100 + b"\n\n",
        [ev(warnings=("unknown-field:" + "y" * 64 + "\u2026",))],
        b"",
    ),
    "bom-only-at-stream-start": (
        b"\xef\xbb\xbf",
        [],
        b"",
    ),
    "partial-bom-at-end-is-tail": (
        b"\xef\xbb",
        [],
        b"\xef\xbb",
    ),
    "trailing-unterminated-line-discarded": (
        b"data: a\n\ndata: b",
        [ev("a")],
        b"data: b",
    ),
    "trailing-block-without-blank-line-discarded": (
        b"data: a\n\nid: 9\ndata: b\n",
        [ev("a")],
        b"id: 9\ndata: b\n",
    ),
    "empty-stream": (b"", [], b""),
    "blank-lines-only": (b"\n\r\n\r\n\n", [], b""),
    # --- MCP Streamable HTTP shapes ----------------------------------------------------------
    "mcp-priming-event-empty-data": (
        b"id: 0\ndata: \n\n",
        [ev("", id="0", last="0")],
        b"",
    ),
    "mcp-priming-event-id-only": (
        b"id: abc\n\n",
        [ev("", id="abc", last="abc")],
        b"",
    ),
    "mcp-retry-only": (
        b"retry: 3000\n\n",
        [ev("", retry=3000)],
        b"",
    ),
    "mcp-message-after-priming": (
        b"id: s1-0\ndata:\n\n"
        b'event: message\nid: s1-1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n',
        [
            ev("", id="s1-0", last="s1-0"),
            ev('{"jsonrpc":"2.0","id":1,"result":{}}', id="s1-1", last="s1-1"),
        ],
        b"",
    ),
    "mcp-server-close-with-retry": (
        b'id: 4\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\nretry: 1000\n\n',
        [
            ev('{"jsonrpc":"2.0","method":"notifications/progress"}', id="4", last="4"),
            ev("", last="4", retry=1000),
        ],
        b"",
    ),
}


@pytest.mark.parametrize(("stream", "expected", "tail"), VECTORS.values(), ids=VECTORS.keys())
def test_vectors(stream: bytes, expected: list[SseEvent], tail: bytes) -> None:
    events, got_tail = decode_in_one(stream)
    assert events == expected
    assert got_tail == tail


@pytest.mark.parametrize(("stream", "expected", "tail"), VECTORS.values(), ids=VECTORS.keys())
def test_vectors_byte_by_byte(stream: bytes, expected: list[SseEvent], tail: bytes) -> None:
    events, got_tail = decode_chunked([stream[i : i + 1] for i in range(len(stream))])
    assert events == expected
    assert got_tail == tail


def test_decode_all_is_feed_and_flush() -> None:
    assert decode_all(b"data: a\n\ndata: b") == [ev("a")]


# --- chunking edge cases ---------------------------------------------------------------------


def test_bom_split_one_and_two_bytes() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"\xef") == []
    assert decoder.tail == b"\xef"
    assert decoder.feed(b"\xbb\xbfdata: x\n\n") == [ev("x")]
    assert decoder.tail == b""


def test_bom_split_two_and_one_bytes_then_second_bom_kept() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"\xef\xbb") == []
    assert decoder.feed(b"\xbf") == []
    assert decoder.feed(b"\xef\xbb\xbfdata: x\n\n") == [
        ev("", warnings=("unknown-field:\ufeffdata",))
    ]


def test_bom_prefix_that_is_not_a_bom() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"\xef\xbb") == []
    assert decoder.feed(b"A\n\n") == [ev("", warnings=("invalid-utf8", "unknown-field:\ufffdA"))]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.tail == b"data: a\r"
    # Were the LF a line end of its own, this would dispatch an event here.
    assert decoder.feed(b"\n") == []
    assert decoder.tail == b"data: a\r\n"
    assert decoder.feed(b"\r") == [ev("a")]
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [ev("b")]
    assert decoder.tail == b""


def test_blank_line_cr_then_lf_in_next_chunk_leaves_no_tail() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r\n\r") == [ev("a")]
    assert decoder.feed(b"\n") == []
    assert decoder.tail == b""
    assert decoder.feed(b"\n") == []  # a real blank line now: nothing open, nothing returned
    assert decoder.flush() == []
    assert not decoder.unterminated


def test_cr_at_chunk_end_then_other_byte() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"data: b\r\r") == [ev("a\nb")]


def test_multibyte_character_split_across_chunks() -> None:
    encoded = "data: caf\u00e9 \u2026 \U0001f600\n\n".encode()
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for i in range(len(encoded)):
        events += decoder.feed(encoded[i : i + 1])
    assert events == [ev("caf\u00e9 \u2026 \U0001f600")]


def test_event_split_mid_block_keeps_tail() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\nid: 1\nda") == [ev("a")]
    assert decoder.tail == b"id: 1\nda"
    assert decoder.feed(b"ta: b\n") == []
    assert decoder.tail == b"id: 1\ndata: b\n"
    assert decoder.feed(b"\n") == [ev("b", id="1", last="1")]
    assert decoder.tail == b""


def test_open_block_start_found_behind_crlf_and_replaced_bytes() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r\n\r\nid: 1\r\ndata: \xff\xfe\r\n") == [ev("a")]
    assert decoder.tail == b"id: 1\r\ndata: \xff\xfe\r\n"
    assert decoder.feed(b"\r\n") == [
        ev("\ufffd\ufffd", id="1", last="1", warnings=("invalid-utf8",))
    ]
    assert decoder.tail == b""


def test_decoded_events_are_frozen() -> None:
    (event,) = decode_all(b"data: x\n\n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.data = "y"  # type: ignore[misc]


# --- flush, unterminated, last_event_id ------------------------------------------------------


def test_flush_discards_unterminated_block_and_keeps_tail() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b\n") == [ev("a", id="1", last="1")]
    assert not decoder.unterminated
    assert decoder.flush() == []
    assert decoder.unterminated
    assert decoder.tail == b"id: 2\ndata: b\n"
    # The id of the torn block never became the event source's last event ID string.
    assert decoder.last_event_id == "1"
    assert decoder.flush() == []


def test_flush_on_clean_end() -> None:
    decoder = SseDecoder()
    decoder.feed(b"data: a\n\n")
    assert decoder.flush() == []
    assert not decoder.unterminated
    assert decoder.tail == b""


def test_feed_after_flush_is_an_error() -> None:
    decoder = SseDecoder()
    decoder.flush()
    with pytest.raises(ValueError):
        decoder.feed(b"data: a\n\n")


def test_last_event_id_updates_on_blank_lines_only() -> None:
    decoder = SseDecoder()
    decoder.feed(b"id: 5\n")
    assert decoder.last_event_id == ""
    decoder.feed(b"\n")
    assert decoder.last_event_id == "5"


# --- properties ------------------------------------------------------------------------------

_LINE_ENDS = st.sampled_from(["\n", "\r", "\r\n"])
_NAMES = st.sampled_from(
    ["data", "data", "data", "id", "event", "retry", "foo", "Data", "", "\ufeffdata", "data "]
)
_VALUES = st.one_of(
    st.text(st.characters(exclude_characters="\r\n"), max_size=12),
    st.sampled_from(["", " ", "1", "300", "1a", "\x00", "\u2026", "\U0001f600", "\u2028"]),
)


@st.composite
def _field_lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["field", "field", "field", "bare", "comment", "blank"]))
    if kind == "blank":
        return ""
    if kind == "comment":
        return ":" + draw(_VALUES)
    if kind == "bare":
        return draw(_NAMES)
    return draw(_NAMES) + draw(st.sampled_from([":", ": ", ":  "])) + draw(_VALUES)


@st.composite
def _streams(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = []
    if draw(st.booleans()):
        parts.append(b"\xef\xbb\xbf")
    for line in draw(st.lists(_field_lines(), max_size=25)):
        parts.append(line.encode("utf-8", "surrogatepass"))
        parts.append(draw(_LINE_ENDS).encode())
        if draw(st.integers(0, 9)) == 0:
            parts.append(draw(st.binary(max_size=4)))  # stray, often invalid UTF-8
    if draw(st.booleans()):
        parts.append(draw(_field_lines()).encode("utf-8", "surrogatepass"))  # unterminated
    return b"".join(parts)


_ANY_STREAM = st.one_of(_streams(), st.binary(max_size=64))


@settings(max_examples=examples(200), deadline=None, database=None)
@given(st.data())
def test_any_chunking_gives_the_same_events_and_tail(data: st.DataObject) -> None:
    stream = data.draw(_ANY_STREAM, label="stream")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12), label="cuts"))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert decode_chunked(chunks) == decode_in_one(stream)


def _reference(stream: bytes) -> list[SseEvent]:
    """The WHATWG algorithm transcribed character by character, slow and literal."""
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\r" or char == "\n":
            lines.append("".join(current))
            current = []
            if char == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
        else:
            current.append(char)
        i += 1
    # The characters after the last line end are not a line: discarded at end of file.
    events: list[SseEvent] = []
    data_buffer, event_type, last_id = "", "", ""
    block_id: str | None = None
    retry: int | None = None
    comments = 0
    has_field = False
    for line in lines:
        if line == "":
            if has_field:
                data = data_buffer[:-1] if data_buffer.endswith("\n") else data_buffer
                events.append(
                    SseEvent(
                        id=block_id,
                        last_event_id=last_id,
                        event=event_type or "message",
                        data=data,
                        retry=retry,
                        id_only=data == "",
                        comments=comments,
                        warnings=(),
                    )
                )
            data_buffer, event_type, block_id, retry, comments, has_field = (
                "",
                "",
                None,
                None,
                0,
                False,
            )
            continue
        if line.startswith(":"):
            comments += 1
            continue
        has_field = True
        if ":" in line:
            field, value = line[: line.index(":")], line[line.index(":") + 1 :]
            if value.startswith(" "):
                value = value[1:]
        else:
            field, value = line, ""
        if field == "event":
            event_type = value
        elif field == "data":
            data_buffer += value + "\n"
        elif field == "id" and "\x00" not in value:
            last_id = block_id = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return events


@settings(max_examples=examples(200), deadline=None, database=None)
@given(_ANY_STREAM)
def test_matches_literal_transcription_of_the_spec(stream: bytes) -> None:
    events = [
        SseEvent(
            id=e.id,
            last_event_id=e.last_event_id,
            event=e.event,
            data=e.data,
            retry=e.retry,
            id_only=e.id_only,
            comments=e.comments,
            warnings=(),
        )
        for e in decode_all(stream)
    ]
    assert events == _reference(stream)


# --- feed_text: the str fast path gives what feed gives -----------------------------------------


@st.composite
def _text_chunks(draw: st.DrawFn) -> list[str]:
    """Blocks of field lines (mostly LF, sometimes CR/CRLF, BOM, U+FFFD, lone surrogates),
    grouped into chunks that mostly end at a block end and sometimes cut a block."""
    blocks = []
    for _ in range(draw(st.integers(0, 8))):
        lines = draw(st.lists(_field_lines(), max_size=4))
        end = draw(st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"]))
        extra = draw(st.sampled_from(["", "", "", "\ufffd", "\ud800", "\ufeff"]))
        blocks.append(end.join([*lines, extra]) + end + end)
    text = "".join(blocks)
    cuts = set(draw(st.lists(st.integers(0, len(text)), max_size=3)))
    offset = 0
    for block in blocks:  # mostly cut at block ends, as a seamwatch capture does
        offset += len(block)
        if draw(st.booleans()):
            cuts.add(offset)
    edges = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=examples(300), deadline=None, database=None)
@given(_text_chunks())
def test_feed_text_gives_what_feed_gives(chunks: list[str]) -> None:
    fast, slow = SseDecoder(), SseDecoder()
    for chunk in chunks:
        assert fast.feed_text(chunk) == slow.feed(chunk.encode("utf-8", "surrogatepass"))
        assert fast.last_event_id == slow.last_event_id
    assert fast.flush() == slow.flush()
    assert (fast.tail, fast.unterminated) == (slow.tail, slow.unterminated)


_line_values = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=6
) | st.sampled_from(["", " ", " x", "a:b", "\x00", "a\x00", "\ufffd", "7"])
_mcp_like_line = st.builds(
    lambda name, sep, value: f"{name}{sep}{value}",
    st.sampled_from(["id", "data", "data", "event", "retry", "", "idx", "dat"]),
    st.sampled_from([": ", ":", ":  ", "", ": :"]),
    _line_values,
)


@st.composite
def _mcp_like_chunks(draw: st.DrawFn) -> list[str]:
    """Chunks of one block each, mostly the `id`/`data` shape of MCP events, with near misses
    (a NUL in an id, no colon, no space, two spaces, other fields), sometimes a torn one."""
    chunks = []
    for _ in range(draw(st.integers(1, 6))):
        lines = draw(st.lists(_mcp_like_line, min_size=0, max_size=3))
        chunk = "".join(line + "\n" for line in lines) + "\n"
        if draw(st.integers(0, 5)) == 0:
            chunk = chunk[: draw(st.integers(0, len(chunk)))]  # a torn block: state pending
        chunks.append(chunk)
    return chunks


@settings(max_examples=examples(1000), deadline=None, database=None)
@given(_mcp_like_chunks())
def test_feed_text_of_mcp_like_blocks_gives_what_feed_gives(chunks: list[str]) -> None:
    fast, slow = SseDecoder(), SseDecoder()
    for chunk in chunks:
        assert fast.feed_text(chunk) == slow.feed(chunk.encode("utf-8", "surrogatepass"))
        assert fast.last_event_id == slow.last_event_id
    assert (fast.tail, fast.flush()) == (slow.tail, slow.flush())


@pytest.mark.parametrize(
    "chunks",
    [
        ["id: 1\ndata: x\n\n", "data: y\n\n", "id: 2\n\n", "id:\ndata:\n\n"],
        ["id:  1\ndata:  x\n\n", "id:a:b\ndata:{}\n\n"],
        ["id: a\x00b\ndata: x\n\n", "data: y\n\n"],  # a NUL: the id is ignored, warned
        [": hi\n", "id: 1\ndata: x\n\n"],  # a comment left the block open
        ["retry: 5\n", "id: 1\ndata: x\n\n"],
        ["event: e\n", "id: 1\ndata: x\n\n"],
        ["x: y\n", "id: 1\ndata: x\n\n"],  # an unknown field's warning is pending
        ["id: 1\n", "\n", "data: x\n\n"],
    ],
)
def test_feed_text_simple_block_cases(chunks: list[str]) -> None:
    fast, slow = SseDecoder(), SseDecoder()
    for chunk in chunks:
        assert fast.feed_text(chunk) == slow.feed(chunk.encode("utf-8"))
        assert fast.last_event_id == slow.last_event_id


def test_feed_text_after_flush_is_an_error() -> None:
    decoder = SseDecoder()
    decoder.flush()
    with pytest.raises(ValueError):
        decoder.feed_text("data: x\n\n")
