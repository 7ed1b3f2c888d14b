"""Streaming helpers for the capture tap: content decoding and SSE event framing.

The proxy hands every chunk to the client unchanged; these classes only shape what is
*recorded*: bytes after content decoding, cut at SSE event boundaries so that redaction sees
whole events and each chunk record's timestamp is when its events completed (DESIGN.md §4).
"""

from __future__ import annotations

import re
import zlib
from typing import Protocol

import brotli

# WHATWG event stream: an event ends with an empty line, and a line ends with CRLF, LF or CR.
# A boundary is therefore a line terminator followed by another. A CR is only a terminator of
# its own when no LF follows it (else the pair is one CRLF), hence the lookahead.
_BOUNDARY = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)")

DEFAULT_EVENT_CAP = 1 << 20
DEFAULT_DECODE_CAP = 64 << 20


class _Decompressor(Protocol):
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


class ContentDecoder:
    """Incrementally undoes `Content-Encoding` (gzip, deflate, br), bounded by `cap` bytes out."""

    SUPPORTED = ("identity", "gzip", "x-gzip", "deflate", "br")

    def __init__(self, content_encoding: str | None, cap: int = DEFAULT_DECODE_CAP) -> None:
        self.encoding = (content_encoding or "identity").strip().lower() or "identity"
        self.cap = cap
        self.produced = 0
        self.capped = False
        self.failed: str | None = None
        self._zlib: zlib._Decompress | None = None
        self._brotli: brotli.Decompressor | None = None
        self._deflate_raw_tried = False
        if self.encoding in ("gzip", "x-gzip"):
            # wbits=47: zlib detects a gzip or a zlib header by itself.
            self._zlib = zlib.decompressobj(wbits=47)
        elif self.encoding == "deflate":
            self._zlib = zlib.decompressobj()
        elif self.encoding == "br":
            self._brotli = brotli.Decompressor()
        elif self.encoding != "identity":
            self.failed = f"unsupported content-encoding: {self.encoding}"

    def decode(self, raw: bytes) -> bytes:
        """Decoded bytes for the next raw chunk; empty once capped or failed."""
        if self.capped or self.failed or not raw:
            return b""
        room = self.cap - self.produced
        try:
            if self._zlib is not None:
                out = self._inflate(raw, room)
            elif self._brotli is not None:
                out = self._brotli.process(raw)
            else:
                out = raw
        except (zlib.error, brotli.error) as e:
            self.failed = f"content decoding failed: {e}"
            return b""
        if len(out) > room:
            out = out[:room]
        if len(out) >= room:
            self.capped = True
        self.produced += len(out)
        return out

    def _inflate(self, raw: bytes, room: int) -> bytes:
        assert self._zlib is not None
        try:
            return self._zlib.decompress(raw, room + 1)
        except zlib.error:
            # "deflate" in the wild is often raw DEFLATE without the zlib wrapper (RFC 9110
            # §8.4.1.2 notes the confusion); retry once, from the first chunk only.
            if self.encoding != "deflate" or self._deflate_raw_tried or self.produced:
                raise
            self._deflate_raw_tried = True
            self._zlib = zlib.decompressobj(wbits=-15)
            return self._zlib.decompress(raw, room + 1)


class EventFramer:
    """Holds back an incomplete SSE event until its blank line arrives (up to `cap` bytes)."""

    def __init__(self, cap: int = DEFAULT_EVENT_CAP) -> None:
        self.cap = cap
        self._pending = bytearray()
        self._scanned = 0

    def feed(self, data: bytes) -> bytes:
        """Append decoded bytes; return the prefix that ends at the last complete event."""
        if not data:
            return b""
        if not self._pending and data.endswith((b"\n\n", b"\n\r\n")):
            # The common case: servers write whole events. A final LF after another line end
            # (LF or CRLF) is a blank line, so everything here is complete.
            return data
        self._pending += data
        # Rescan a little before the new bytes: a boundary may straddle the chunk edge.
        start = max(0, self._scanned - 2)
        end = -1
        for m in _BOUNDARY.finditer(self._pending, start):
            end = m.end()
        if end < 0:
            if len(self._pending) < self.cap:
                self._scanned = len(self._pending)
                return b""
            end = len(self._pending)  # an oversized event goes out unframed
        out = bytes(self._pending[:end])
        del self._pending[:end]
        self._scanned = len(self._pending)
        return out

    def flush(self) -> bytes:
        """The unterminated tail at stream end."""
        out = bytes(self._pending)
        self._pending.clear()
        self._scanned = 0
        return out

    @property
    def pending(self) -> int:
        return len(self._pending)
