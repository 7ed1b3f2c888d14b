"""Sans-IO Server-Sent Events decoder, WHATWG HTML "event stream interpretation" to the letter.

Spec: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

Two deliberate differences from a browser, because seamwatch watches cursors, not messages:

- every block that held a field line is returned, also when its data buffer is empty and a
  browser would not dispatch it (an MCP priming event `id: X` with no payload, a lone `retry:`);
- `id` and `retry` describe the block that carried them, beside the stream-wide
  `last_event_id`; anomalies a browser silently ignores are reported in `warnings`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["SseDecoder", "SseEvent", "decode_all"]

_BOM = b"\xef\xbb\xbf"
_CR = 0x0D
_LF = 0x0A
# "a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF) character pair, a single U+000A LINE FEED
# (LF) character not preceded by a U+000D CARRIAGE RETURN (CR) character, and a single U+000D
# CARRIAGE RETURN (CR) character not followed by a U+000A LINE FEED (LF) character being the ways
# in which a line can end." Not str.splitlines: it also splits on \v, \f, \x1c-\x1e, \x85, \u2028.
_LINE_END = re.compile(r"\r\n|\r|\n")
_LINE_END_BYTES = re.compile(rb"(\r\n|\r|\n)")
# The usual block of an MCP stream as `_interpret` reads it: an optional `id` line (its value
# without NUL, which would make the field ignored), an optional `data` line, the blank line;
# "If value starts with a U+0020 SPACE character, remove it" is the optional space. Only for
# text without CR (checked before), so LF is the only line end.
_SIMPLE_BLOCK = re.compile(r"(?:id: ?([^\n\x00]*)\n)?(?:data: ?([^\n]*)\n)?\n")
# Field names longer than this are cut in the "unknown-field:" warning (a stray payload line
# without a colon is a "field name" too, and a warning is not the place for a megabyte of it).
_WARNED_NAME_MAX = 64


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One block of an event stream: the lines up to a blank line, holding at least one field."""

    id: str | None
    """The `id` set in this block (None: no valid `id` field; "": reset by an empty `id`)."""
    last_event_id: str
    """The WHATWG last event ID buffer after this block, as a browser would report it."""
    event: str
    """The event type; "message" when the block set none or an empty one."""
    data: str
    """The data buffer with its final LF removed."""
    retry: int | None
    """The last valid (ASCII digits only) `retry` value in this block."""
    id_only: bool
    """True when `data` is "": no payload, e.g. an MCP priming event that only issues a cursor."""
    comments: int
    """How many comment lines (starting with ':') the block held."""
    warnings: tuple[str, ...]
    """Anomalies in this block: id-contains-nul, invalid-retry, retry-too-large, invalid-utf8,
    unknown-field:<name>."""


def _event_factory() -> Callable[
    [str | None, str, str, str, int | None, bool, int, tuple[str, ...]], SseEvent
]:
    """A positional SseEvent constructor, faster than the frozen dataclass __init__.

    The generated __init__ of a frozen dataclass goes through object.__setattr__ once per
    field; setting the slots through their descriptors skips that, and this runs once per
    event of every captured stream. A field added to SseEvent but not here stays unset, and
    the tests, which compare decoded events with __init__-built ones, fail on it.
    """
    new = object.__new__
    set_id, set_last, set_event, set_data, set_retry, set_only, set_comments, set_warnings = (
        getattr(SseEvent, name).__set__
        for name in (
            "id",
            "last_event_id",
            "event",
            "data",
            "retry",
            "id_only",
            "comments",
            "warnings",
        )
    )

    def new_event(
        id: str | None,
        last_event_id: str,
        event: str,
        data: str,
        retry: int | None,
        id_only: bool,
        comments: int,
        warnings: tuple[str, ...],
    ) -> SseEvent:
        obj = new(SseEvent)
        set_id(obj, id)
        set_last(obj, last_event_id)
        set_event(obj, event)
        set_data(obj, data)
        set_retry(obj, retry)
        set_only(obj, id_only)
        set_comments(obj, comments)
        set_warnings(obj, warnings)
        return obj

    return new_event


_new_event = _event_factory()


class SseDecoder:
    """Incremental event-stream decoder: `feed(bytes)` returns the blocks completed so far.

    At the end of the stream call `flush()`. It returns `[]`: "Once the end of the file is
    reached, any pending data must be discarded", so an unterminated block is never an event.
    Its raw bytes stay in `tail` and `unterminated` tells that there were any; a reader that
    wants to flag a torn stream looks there, not at a fabricated event. `feed()` after
    `flush()` raises ValueError.
    """

    def __init__(self) -> None:
        # The current (incomplete) block starts at _buf[0]: _buf is exactly the tail.
        self._buf = bytearray()
        # _buf[:_pos] is already split into lines and interpreted; _buf[_pos:] holds no line end.
        self._pos = 0
        self._bom_pending = True
        self._after_cr = False
        self._closed = False
        self._unterminated = False
        # "When a stream is parsed, a data buffer, an event type buffer, and a last event ID
        # buffer must be associated with it. They must be initialized to the empty string."
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self._dispatched_id = ""
        # Per-block extras that seamwatch reports beside the WHATWG buffers.
        self._id: str | None = None
        self._retry: int | None = None
        self._comments = 0
        self._warnings: list[str] = []
        self._fields = False

    @property
    def tail(self) -> bytes:
        """Bytes fed but not yet part of a complete block (after `flush()`: the torn tail)."""
        return bytes(self._buf)

    @property
    def unterminated(self) -> bool:
        """True once `flush()` ended the stream inside a block (`tail` is not empty)."""
        return self._unterminated

    @property
    def last_event_id(self) -> str:
        """The event source's last event ID string: what a browser sends as Last-Event-ID.

        It is set at each blank line ("Set the last event ID string of the event source to the
        value of the last event ID buffer"), so an `id` in an unterminated block never reaches it.
        """
        return self._dispatched_id

    @property
    def idle(self) -> bool:
        """True between blocks: nothing pending (no open block, no CR awaiting its LF)."""
        return not self._buf and not self._after_cr and not self._closed

    def skip(self, last_event_id: str) -> None:
        """Whole blocks of text holding no BOM, decoded elsewhere, left the last event ID
        buffer at `last_event_id` (the bulk lane of `analyzer.ingest.bulk`); only when idle."""
        self._bom_pending = False
        self._last_id = self._dispatched_id = last_event_id

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Take the next bytes of the stream; return the blocks they complete, in order."""
        if self._closed:
            raise ValueError("feed() after flush(): the stream has ended")
        buf = self._buf
        scan_from = len(buf)
        buf += chunk
        if self._bom_pending:
            # "The UTF-8 decode algorithm strips one leading UTF-8 Byte Order Mark (BOM), if
            # any": only at stream start, so wait until 3 bytes can tell.
            if len(buf) < 3 and _BOM.startswith(buf):
                return []
            self._bom_pending = False
            if buf.startswith(_BOM):
                del buf[:3]
            scan_from = 0
        pos = self._pos
        if self._after_cr and len(buf) > pos:
            # The CR that ended the previous chunk already ended its line; an LF right after it
            # is the second half of that CRLF, not another (blank) line.
            self._after_cr = False
            if buf[pos] == _LF:
                if pos == 0:
                    del buf[:1]  # the blank line that closed the last block ended in CRLF
                else:
                    pos += 1
        if scan_from < pos:
            scan_from = pos
        last_lf = buf.rfind(b"\n", scan_from)
        last_cr = buf.rfind(b"\r", scan_from)
        end = (last_lf if last_lf > last_cr else last_cr) + 1
        if end <= pos:
            self._pos = pos
            return []
        region = bytes(buf[pos:end])
        self._after_cr = region[-1] == _CR
        # Cut at line ends (ASCII), so decoding piecewise gives what decoding the whole stream
        # would: the UTF-8 decoder never folds an ASCII byte into a replaced sequence.
        text = region.decode("utf-8", "replace")
        lines = _LINE_END.split(text) if "\r" in text else text.split("\n")
        lines.pop()  # the empty remainder after the final line end
        raw_lines: Iterator[bytes] | None = None
        if "\ufffd" in text:
            # Something was replaced, or the stream holds a literal U+FFFD: look at the bytes.
            raw_lines = iter(_LINE_END_BYTES.split(region)[0::2])
        events = self._interpret(lines, raw_lines)
        open_lines = 0  # lines after the last blank one: the block still open
        for line in reversed(lines):
            if not line:
                break
            open_lines += 1
        if open_lines == len(lines):
            cut = 0
        elif open_lines == 0:
            cut = end
        else:
            cut = pos + _open_block_offset(region, lines[-open_lines:])
        if cut:
            del buf[:cut]
        self._pos = end - cut
        return events

    def feed_text(self, text: str) -> list[SseEvent]:
        """`feed(text.encode("utf-8", "surrogatepass"))`, faster for text of whole blocks.

        A capture stores chunk bytes as text, cut at block ends (DESIGN.md §4). When nothing is
        pending and the text is whole lines ending with a blank line, holds no CR (so no line
        end can straddle chunks) and no lone surrogate (its bytes are valid UTF-8: none replaced),
        its lines are exactly those `feed` would find: they go straight to the interpreter.
        """
        if (
            self._buf
            or self._closed
            or self._after_cr
            or not text.endswith("\n\n")
            or "\r" in text
            or (self._bom_pending and text.startswith("\ufeff"))
        ):
            return self.feed(text.encode("utf-8", "surrogatepass"))
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: its bytes are no valid UTF-8
                return self.feed(text.encode("utf-8", "surrogatepass"))
        self._bom_pending = False
        simple = _SIMPLE_BLOCK.fullmatch(text)
        if simple is not None:
            # One block of an `id` line and/or a `data` line (the usual MCP event): what
            # `_interpret` makes of it, without its per-line loop. No block is open (its bytes
            # would be in `_buf`), so the per-block buffers are at their initial values.
            block_id, payload = simple.groups()
            if block_id is not None:
                self._last_id = block_id
            last_id = self._dispatched_id = self._last_id
            if payload is None:
                payload = ""
            return [_new_event(block_id, last_id, "message", payload, None, not payload, 0, ())]
        lines = text.split("\n")
        lines.pop()  # the empty remainder after the final line end
        return self._interpret(lines, None)

    def flush(self) -> list[SseEvent]:
        """End the stream; always `[]` (the unterminated block, if any, is left in `tail`)."""
        # "Once the end of the file is reached, any pending data must be discarded. (If the file
        # ends in the middle of an event, before the final empty line, the incomplete event is
        # not dispatched.)"
        if not self._closed:
            self._closed = True
            self._unterminated = bool(self._buf)
        return []

    def _interpret(self, lines: list[str], raw_lines: Iterator[bytes] | None) -> list[SseEvent]:
        """Process complete lines in order; return the blocks that a blank line finished."""
        events: list[SseEvent] = []
        # Locals for speed: this loop runs once per line of every captured stream.
        data = self._data
        event_type = self._event
        last_id = self._last_id
        dispatched_id = self._dispatched_id
        block_id = self._id
        retry = self._retry
        comments = self._comments
        warnings = self._warnings
        fields = self._fields
        for line in lines:
            if raw_lines is not None and not _is_utf8(next(raw_lines)):
                warnings.append("invalid-utf8")
            if not line:
                # "If the line is empty (a blank line): Dispatch the event".
                # Dispatch step 1: "Set the last event ID string of the event source to the
                # value of the last event ID buffer."
                dispatched_id = last_id
                if fields:
                    # Step 2 would return here for an empty data buffer; seamwatch keeps the
                    # block. Step 3: "If the data buffer's last character is a U+000A LINE FEED
                    # (LF) character, then remove the last character from the data buffer."
                    payload = "\n".join(data)
                    events.append(
                        _new_event(
                            block_id,
                            last_id,
                            # Step 6: the type is the event type buffer unless it is empty.
                            event_type or "message",
                            payload,
                            retry,
                            not payload,
                            comments,
                            tuple(warnings),
                        )
                    )
                    # Step 7: "Set the data buffer and the event type buffer to the empty
                    # string." The last event ID buffer is not reset.
                    data = []
                    event_type = ""
                    block_id = None
                    retry = None
                    warnings = []
                    fields = False
                elif warnings:
                    warnings = []
                comments = 0
                continue
            if line[0] == ":":
                # "If the line starts with a U+003A COLON character (:): Ignore the line."
                comments += 1
                continue
            fields = True
            # "If the line contains a U+003A COLON character (:): Collect the characters on the
            # line before the first U+003A COLON character (:), and let field be that string.
            # Collect the characters on the line after the first U+003A COLON character (:), and
            # let value be that string. If value starts with a U+0020 SPACE character, remove it
            # from value." "Otherwise, ... using the whole line as the field name, and the empty
            # string as the field value." (partition gives exactly that when there is no colon.)
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                # "Append the field value to the data buffer, then append a single U+000A LINE
                # FEED (LF) character to the data buffer." (joined with LF at dispatch.)
                data.append(value)
            elif name == "id":
                # "If the field value does not contain U+0000 NULL, then set the last event ID
                # buffer to the field value. Otherwise, ignore the field."
                if "\x00" in value:
                    warnings.append("id-contains-nul")
                else:
                    last_id = value
                    block_id = value
            elif name == "event":
                # "Set the event type buffer to field value."
                event_type = value
            elif name == "retry":
                # "If the field value consists of only ASCII digits, then interpret the field
                # value as an integer in base ten ... Otherwise, ignore the field."
                # (str.isdigit alone also accepts non-ASCII digits such as "²" or "٣".)
                if value.isascii() and value.isdigit():
                    try:
                        retry = int(value)
                    except ValueError:
                        # Longer than Python's int-from-str limit (4300 digits): no sane delay.
                        warnings.append("retry-too-large")
                else:
                    warnings.append("invalid-retry")
            else:
                # "Otherwise: The field is ignored."
                if len(name) > _WARNED_NAME_MAX:
                    name = name[:_WARNED_NAME_MAX] + "…"
                warnings.append(f"unknown-field:{name}")
        self._data = data
        self._event = event_type
        self._last_id = last_id
        self._dispatched_id = dispatched_id
        self._id = block_id
        self._retry = retry
        self._comments = comments
        self._warnings = warnings
        self._fields = fields
        return events


def _open_block_offset(region: bytes, open_lines: list[str]) -> int:
    """Where in `region` (whole lines) its last `open_lines` begin, walking back from the end."""
    offset = len(region)
    for line in reversed(open_lines):
        # A line's content holds no CR, so a CR right before its final LF makes a CRLF.
        offset -= 2 if region[offset - 1] == _LF and region[offset - 2 : offset - 1] == b"\r" else 1
        if "\ufffd" in line:
            # Replaced bytes have no length in the text: count the bytes themselves.
            parts = _LINE_END_BYTES.split(region)
            blank_end = len(parts) - 1 - 2 * len(open_lines)
            return sum(map(len, parts[:blank_end]))
        offset -= len(line.encode("utf-8"))
    return offset


def _is_utf8(raw: bytes) -> bool:
    """Whether `raw` decodes as UTF-8 without replacement."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_all(data: bytes) -> list[SseEvent]:
    """Decode a whole stream at once (feed + flush); an unterminated tail is dropped."""
    decoder = SseDecoder()
    return decoder.feed(data) + decoder.flush()
