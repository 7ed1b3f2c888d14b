"""Streaming helpers for the capture tap: content decoding and SSE event framing.

The proxy hands every chunk to the client unchanged; these classes only shape what is
*recorded*: bytes after content decoding, cut at SSE event boundaries so that redaction sees
whole events and each chunk record's timestamp is when its events completed (DESIGN.md §4).
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Callable
from functools import partial
from typing import NamedTuple, Protocol

import brotli

# zstd as mitmproxy itself decodes it: the standard library's from 3.14, its backport before.
if sys.version_info >= (3, 14):  # pragma: no cover
    from compression import zstd
else:
    from backports import zstd

# WHATWG event stream: an event ends with an empty line, and a line ends with CRLF, LF or CR.
# A boundary is therefore a line terminator followed by another. A CR is only a terminator of
# its own when no LF follows it (else the pair is one CRLF), hence the lookahead.
_BOUNDARY = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)")

DEFAULT_EVENT_CAP = 1 << 20
DEFAULT_DECODE_CAP = 64 << 20
# "deflate" whose first bytes read as a zlib header yet are raw DEFLATE is retried raw from the
# first byte, if no more than this came before the error (in practice a few bytes).
_DEFLATE_HEAD_CAP = 64 << 10


class _Decompressor(Protocol):
    """zlib's and zstd's decompressor objects alike."""

    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


class ContentDecoder:
    """Incrementally undoes `Content-Encoding` (gzip, deflate, br, zstd), bounded by `cap`.

    However much a chunk inflates, one `decode` call makes at most `cap + 1` bytes of output
    (and hands out at most what is left of `cap`): a decompression bomb costs its head only.
    `ended` says that the compressed stream (its first gzip member or zstd frame) was read to
    its end, so that a later `failed` is about bytes after it, not about the stream itself.

    Several codings (`gzip, br`: listed in the order applied, RFC 9110 §8.4) are undone in
    reverse order by a chain of decoders, one a coding, each bounded by `cap` as one alone is:
    `capped` when the final output reached the cap or an inner stage did (the rest cannot be
    decoded then), `failed` the first stage's failure, `ended` when every stage ended.
    """

    def __init__(self, content_encoding: str | None, cap: int = DEFAULT_DECODE_CAP) -> None:
        names = [name.strip().lower() for name in (content_encoding or "").split(",")]
        # Empty list elements are ignored (RFC 9110 §5.6.1); so is "identity", which is none.
        names = [name for name in names if name not in ("", "identity", "none")]
        self.encoding = ", ".join(names) or "identity"
        self.cap = cap
        self.produced = 0
        self.capped = False
        self.ended = False
        self.failed: str | None = None
        # gzip, deflate and zstd: `_stream` decompresses the current unit (gzip member, zstd
        # frame; deflate has one), `_fresh` makes the decompressor of the next unit.
        self._stream: _Decompressor | None = None
        self._fresh: Callable[[], _Decompressor] | None = None
        self._brotli: brotli.Decompressor | None = None
        # Raw DEFLATE's first bytes may pass for a zlib header (one byte always does): the
        # input fed while nothing came out of it, replayed if it turns out not to be zlib.
        self._deflate_head: bytearray | None = None
        # Several codings: the decoders of each, in the order they are undone.
        self._stages: list[ContentDecoder] = []
        if len(names) > 1:
            self._stages = [ContentDecoder(name, cap) for name in reversed(names)]
            unknown = next((stage for stage in self._stages if stage.failed), None)
            if unknown is not None:
                self.failed = f"{unknown.failed} (in {self.encoding})"
        elif self.encoding in ("gzip", "x-gzip"):
            # wbits=47: zlib detects a gzip or a zlib header by itself.
            self._fresh = partial(zlib.decompressobj, wbits=47)
        elif self.encoding in ("deflate", "deflateraw"):
            # "deflateraw" (mitmproxy's name) is decoded as "deflate" is, as mitmproxy does.
            self.encoding = "deflate"
            self._stream = zlib.decompressobj()
            self._deflate_head = bytearray()
        elif self.encoding == "br":
            self._brotli = brotli.Decompressor()
        elif self.encoding == "zstd":
            self._fresh = zstd.ZstdDecompressor
        elif self.encoding != "identity":
            self.failed = f"unsupported content-encoding: {self.encoding}"
        if self._fresh is not None:
            self._stream = self._fresh()

    def decode(self, raw: bytes) -> bytes:
        """Decoded bytes for the next raw chunk; empty once capped or failed."""
        if self.capped or self.failed or not raw:
            return b""
        if self._stages:
            return self._chain(raw)
        room = self.cap - self.produced
        try:
            if self._stream is not None:
                out = self._units(raw, room)
            elif self._brotli is not None:
                out = self._unbrotli(raw, room)
            else:
                out = raw
        except (zlib.error, brotli.error, zstd.ZstdError) as e:
            self.failed = f"content decoding failed: {e}"
            return b""
        if len(out) > room:
            out = out[:room]
        if len(out) >= room:
            self.capped = True
        self.produced += len(out)
        return out

    def _chain(self, raw: bytes) -> bytes:
        """Decode a chunk through every stage; each hands the next at most `cap` bytes."""
        out = raw
        for stage in self._stages:
            out = stage.decode(out)
            if stage.failed and not self.failed:
                self.failed = f"{stage.failed} (undoing {stage.encoding} of {self.encoding})"
            self.capped = self.capped or stage.capped
        self.ended = all(stage.ended for stage in self._stages)
        self.produced = self._stages[-1].produced
        return out

    def _units(self, raw: bytes, room: int) -> bytes:
        """Decompress one chunk: a gzip body may be several members (RFC 1952 §2.2), a zstd
        body several frames (RFC 8878 §3.1), decoded one after another.

        Bytes after the end of a deflate stream, or that do not start another member or frame,
        are not part of the body: the output before them is kept and `failed` says how many
        followed (rather than dropping them without a word, as a bare `decompress` does with
        `unused_data`).
        """
        out = b""
        data = raw
        while data:
            assert self._stream is not None
            if not self._stream.eof:
                out += self._decompress(data, room + 1 - len(out))
                self.ended = self.ended or self._stream.eof
            elif self._fresh is None:
                self.failed = (
                    f"content decoding failed: {len(data)} bytes after the end of the "
                    f"{self.encoding} stream"
                )
                return out
            else:
                if self.encoding != "zstd":
                    # gzip(1) skips zero bytes padding the end of a file; so does Python's gzip.
                    data = data.lstrip(b"\0")
                    if not data:
                        break
                self._stream = self._fresh()
                try:
                    out += self._stream.decompress(data, room + 1 - len(out))
                except (zlib.error, zstd.ZstdError) as e:
                    # Keep what the earlier units gave; the rest is not one.
                    kind, unit = (
                        ("zstd", "frame") if self.encoding == "zstd" else ("gzip", "member")
                    )
                    self.failed = (
                        f"content decoding failed: {len(data)} bytes after a {kind} {unit} "
                        f"are not another {unit} ({e})"
                    )
                    return out
            if len(out) > room:
                break  # capped: what is left of the input is never read
            data = self._stream.unused_data if self._stream.eof else b""
        return out

    def _decompress(self, data: bytes, limit: int) -> bytes:
        assert self._stream is not None
        head = self._deflate_head
        if head is not None:
            # Kept while nothing came out, up to a bound (a zlib header is 2 bytes).
            head += data
            if len(head) > _DEFLATE_HEAD_CAP:
                self._deflate_head = head = None
        try:
            out = self._stream.decompress(data, limit)
        except zlib.error:
            # "deflate" in the wild is often raw DEFLATE without the zlib wrapper (RFC 9110
            # §8.4.1.2 notes the confusion); retry once, from the first byte.
            if head is None:
                raise
            self._deflate_head = None
            self._stream = zlib.decompressobj(wbits=-15)
            return self._stream.decompress(bytes(head), limit)
        if out:
            self._deflate_head = None  # zlib it is
        return out

    def _unbrotli(self, raw: bytes, room: int) -> bytes:
        assert self._brotli is not None
        if self._brotli.is_finished():
            # RFC 7932 defines one stream a body; brotli fails on anything after it.
            self.failed = (
                f"content decoding failed: {len(raw)} bytes after the end of the br stream"
            )
            return b""
        # The limit stops the output buffer growing past it (brotli may overshoot by one
        # growth step, cut in `decode`); the input it did not get to waits inside the decoder.
        out: bytes = self._brotli.process(raw, output_buffer_limit=room + 1)
        while len(out) <= room and not self._brotli.can_accept_more_data():
            out += self._brotli.process(b"", output_buffer_limit=room + 1 - len(out))
        self.ended = self._brotli.is_finished()
        return out


def with_decode_error(error: str | None, decode_error: str | None) -> str | None:
    """A stream's end error with why its content could not be decoded, kept beside a transport
    error (the analysis looks for the decoding failure: `analyzer.normalize.DECODE_FAILURE`)."""
    if not decode_error:
        return error
    return f"{error}; {decode_error}" if error else decode_error


# Encoded bytes of a body handed to the decoder at a time: once the cap is reached the rest is
# never read, and counted as not kept.
_BODY_STEP = 16 << 10


class Decoded(NamedTuple):
    """A body as its record holds it: `body` (decoded, at most the cap), `dropped` (bytes not
    kept: its `truncated_bytes`), `error` (why it is kept still encoded, if it is)."""

    body: bytes
    dropped: int = 0
    error: str | None = None


def decode_body(
    raw: bytes, content_encoding: str | None, *, cap: int, broken: bool = False
) -> Decoded:
    """A body after content decoding, at most `cap` bytes of it, and how many bytes of it a
    record does not keep (its `truncated_bytes`); `broken`: the sender broke the body off.

    As mitmproxy's `get_content(strict=False)` gives it, but never decoding more than the cap
    (+1 byte, to know that the body goes on): a 64 MiB gzip of zeros would inflate to ~64 GB.
    An unknown encoding, or a stream that fails to decode, is kept as it came (raw), with the
    reason as `error`, except that a body the upstream broke off keeps what of it inflated.

    The count of bytes not kept is exact when nothing is decoded or the decoded body fits
    within the cap. When decoding stopped at the cap, the decoded total is unknown (finding
    it out is the cost the cap avoids): the count is then the decoded byte seen past the cap
    plus the encoded bytes never handed to the decoder (those in the step that reached the
    cap are not counted), a lower bound that is never 0 for a body cut short.
    """
    decoder = ContentDecoder(content_encoding, cap + 1)
    error = None
    if raw and decoder.encoding != "identity":
        if not decoder.failed:
            parts: list[bytes] = []
            fed = 0
            while fed < len(raw) and not (decoder.capped or decoder.failed):
                parts.append(decoder.decode(raw[fed : fed + _BODY_STEP]))
                fed = min(fed + _BODY_STEP, len(raw))
            body = b"".join(parts)
            del parts
            if decoder.capped:
                dropped = decoder.produced - cap + len(raw) - fed
                return Decoded(body[:cap], dropped)
            # A stream read to its end is the body (bytes after it are dropped, as mitmproxy
            # drops them after gzip and deflate). One that failed or stopped short inside
            # is left raw, as mitmproxy leaves it, except that its gzip decoding keeps what a
            # truncated stream inflated, and that a body the upstream broke off keeps that.
            lenient = decoder.encoding in ("gzip", "x-gzip") and not decoder.failed
            if decoder.ended or lenient or (broken and body):
                return Decoded(body)
        error = (
            decoder.failed or f"content decoding failed: the {decoder.encoding} stream ended early"
        )
    return Decoded(raw[:cap], max(0, len(raw) - cap), error)


class Piece(NamedTuple):
    """Bytes to record; `withheld` more bytes of the same event followed them, not recorded."""

    data: bytes
    withheld: int = 0


def _utf8_cut(buf: bytes | bytearray, n: int) -> int:
    """`n`, moved back so that it does not split a UTF-8 sequence (when one ends there)."""
    i = n
    while i > 0 and n - i < 3 and 0x80 <= buf[i - 1] < 0xC0:
        i -= 1  # continuation bytes
    if i > 0 and buf[i - 1] >= 0xC0:
        lead = buf[i - 1]
        size = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if n - (i - 1) < size:
            return i - 1
    return n


class EventFramer:
    """Holds back an incomplete SSE event until its blank line arrives (up to `cap` bytes).

    An event larger than `cap` is recorded in pieces as it comes, unless `withhold` is set (the
    capture redacts): a secret straddling a cut would then reach disk half redacted, so the
    framer keeps the event's first `cap` bytes (the head), drops the rest of the event and
    hands out the head when the event ends, with the count of bytes withheld (recorded as the
    chunk's `truncated_bytes`, DESIGN.md §4, as a capped body's are). The boundary that ends
    the event is kept, so the recorded stream still parses: the event reads truncated.
    """

    def __init__(self, cap: int = DEFAULT_EVENT_CAP, *, withhold: bool = False) -> None:
        self.cap = cap
        self.withhold = withhold
        self._pending = bytearray()
        self._scanned = 0
        # Cutting an oversized event: bytes dropped so far, and the last few of them, in
        # which a boundary may begin that the next chunk completes.
        self._cutting = False
        self._withheld = 0
        self._carry = b""

    def feed(self, data: bytes) -> list[Piece]:
        """Append decoded bytes; return what to record: complete events, or a cut event's head."""
        if not data:
            return []
        pieces: list[Piece] = []
        if self._cutting:
            scan = self._carry + data
            m = _BOUNDARY.search(scan)
            if m is None:
                self._withheld += len(data)
                self._carry = scan[-3:]
                return pieces
            # The carry was counted as withheld; the boundary and what follows are not.
            withheld = self._withheld - len(self._carry) + m.start()
            pieces.append(Piece(bytes(self._pending), withheld))
            self._restart()
            data = scan[m.start() :]
        if not self._pending and data.endswith((b"\n\n", b"\n\r\n")):
            # The common case: servers write whole events. A final LF after another line end
            # (LF or CRLF) is a blank line, so everything here is complete.
            pieces.append(Piece(data))
            return pieces
        self._pending += data
        # Rescan a little before the new bytes: a boundary may straddle the chunk edge.
        start = max(0, self._scanned - 2)
        end = -1
        for m in _BOUNDARY.finditer(self._pending, start):
            end = m.end()
        if end < 0:
            if len(self._pending) < self.cap:
                self._scanned = len(self._pending)
                return pieces
            if self.withhold:
                self._cut()
                return pieces
            end = len(self._pending)  # an oversized event goes out unframed
        pieces.append(Piece(bytes(self._pending[:end])))
        del self._pending[:end]
        self._scanned = len(self._pending)
        return pieces

    def _cut(self) -> None:
        """Keep an oversized event's head, withhold the rest until the event ends."""
        pending = self._pending
        # No boundary is in `pending`, but one may begin in its last 3 bytes (a boundary is at
        # most 4): those go to the withheld part, so that the head never holds a boundary.
        keep = _utf8_cut(pending, max(0, min(self.cap, len(pending) - 3)))
        self._cutting = True
        self._withheld = len(pending) - keep
        self._carry = bytes(pending[-3:])
        del pending[keep:]
        self._scanned = len(pending)

    def flush(self) -> Piece:
        """The unterminated tail at stream end (a cut event's head, with its withheld count)."""
        out = Piece(bytes(self._pending), self._withheld)
        self._restart()
        return out

    def _restart(self) -> None:
        """Nothing held back: the next byte begins an event."""
        self._pending.clear()
        self._scanned = 0
        self._cutting, self._withheld, self._carry = False, 0, b""

    @property
    def pending(self) -> int:
        """Bytes of an incomplete event seen so far: held back, or withheld from a cut one."""
        return len(self._pending) + self._withheld


# A blank line ends an event (WHATWG HTML, 9.2.6: "If the line is empty ... dispatch the
# event"); lines end with CRLF, LF or CR. Mixed line endings within one stream are not counted.
_EVENT_ENDS = ("\n\n", "\r\n\r\n", "\r\r")
_EVENT_ENDS_BYTES = tuple(end.encode() for end in _EVENT_ENDS)


def count_events(data: str | bytes) -> int:
    """SSE events that `data` (whole events, as the framer cuts them) completes."""
    if not data:
        return 0
    if isinstance(data, str):
        return sum(map(data.count, _EVENT_ENDS))
    return sum(map(data.count, _EVENT_ENDS_BYTES))
