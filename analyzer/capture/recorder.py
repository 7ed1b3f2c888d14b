"""The recorder: turns what the proxy saw into schema-1 records (DESIGN.md §4).

It knows nothing of mitmproxy: the addon hands it plain values (through the capture worker,
`pipeline.py`). It redacts before queueing and leaves serialization and I/O to the writer, except
for the common case of a streamed response, whole events of plain text with nothing to redact,
whose chunk records it serializes itself (`StreamTap.feed_many`), a batch at a time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import repeat
from json.encoder import encode_basestring
from operator import add
from typing import Protocol

from pydantic_core import to_json

from analyzer.capture.framing import (
    DEFAULT_DECODE_CAP,
    DEFAULT_EVENT_CAP,
    ContentDecoder,
    EventFramer,
    count_events,
    with_decode_error,
)
from analyzer.capture.redaction import Redactor
from analyzer.records import StreamEndHow, body_from_bytes

DEFAULT_BODY_CAP = 8 << 20
DEFAULT_REDACTED_EVENT_CAP = DEFAULT_BODY_CAP
"""With redaction on, an SSE event up to this size is recorded (and redacted) whole, as a
non-streamed body is; a larger one keeps this much of its head and records `truncated_bytes`."""

Headers = Sequence[tuple[str, str]]


class Sink(Protocol):
    """Where records go: the writer's queue."""

    def submit(self, record: dict[str, object]) -> None: ...

    def submit_encoded(self, members: list[bytes]) -> None: ...

    def count_redacted(self, n: int) -> None: ...


def _stamp(kind: str, at: tuple[int, int] | None = None) -> dict[str, object]:
    ts_ns, mono_ns = at if at is not None else (time.time_ns(), time.monotonic_ns())
    return {"kind": kind, "ts_ns": ts_ns, "mono_ns": mono_ns}


Stamp = tuple[int, int]
"""(wall clock ns, monotonic ns) of when the proxy saw something; now when omitted."""


def header_value(headers: Headers, name: str) -> str | None:
    """The first value of a header, matched case-insensitively."""
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


# Whole events: a final LF after another line end (LF or CRLF) is a blank line (`EventFramer`).
_WHOLE_EVENTS = (b"\n\n", b"\n\r\n")


def is_event_stream(headers: Headers) -> bool:
    """True when the response's Content-Type is text/event-stream (parameters ignored)."""
    ctype = header_value(headers, "content-type") or ""
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


class StreamTap:
    """Records one streamed response: decoded bytes cut at event boundaries, then its end."""

    def __init__(self, recorder: Recorder, flow: str, content_encoding: str | None) -> None:
        self.recorder = recorder
        self.flow = flow
        self.content_encoding = content_encoding
        self.decoder = ContentDecoder(content_encoding, recorder.decode_cap)
        # Redacting, an event is redacted whole: held up to a larger bound, past it cut
        # (`EventFramer`), never recorded in pieces that a secret could straddle.
        if recorder.redactor.enabled:
            self.framer = EventFramer(recorder.redacted_event_cap, withhold=True)
        else:
            self.framer = EventFramer(recorder.event_cap)
        self.n = 0
        self.ended = False
        # A chunk record's members as the writer's `to_json` writes them (`feed_many`), with
        # what is fixed for the stream baked in: %d ts_ns, mono_ns and n, %s the data text.
        fixed = (to_json(flow).decode(), to_json(content_encoding).decode())
        flow_json, encoding_json = (part.replace("%", "%%") for part in fixed)
        self._members = (
            f'"kind":"chunk","ts_ns":%d,"mono_ns":%d,"flow":{flow_json},"n":%d,'
            f'"content_encoding":{encoding_json},"data":{{"text":%s}}}}'
        )

    def feed_many(self, raws: list[bytes], monos: list[int], wall_offset: int) -> None:
        """Record raw chunks seen at `monos` (monotonic ns; wall clock = mono + wall_offset).

        The same records, byte for byte, as `feed` called on each in turn. Runs of chunks that
        each hold whole events of UTF-8 text with nothing to redact (the common case) are
        recorded in one pass, without a dict per record, the redaction precheck run once on
        the run joined; the rest, e.g. an event split across two reads, go through `feed`.
        """
        i, count = 0, len(raws)
        while i < count:
            j = self._whole_run(raws, i)
            if j > i and self._record_plain(raws[i:j], monos[i:j], wall_offset):
                i = j
                continue
            for k in range(i, max(j, i + 1)):
                self.feed(raws[k], (monos[k] + wall_offset, monos[k]))
            i = max(j, i + 1)

    def _whole_run(self, raws: list[bytes], i: int) -> int:
        """The end of the run from `i` of chunks that `feed` would record whole, as they came."""
        decoder = self.decoder
        if decoder.encoding != "identity" or decoder.capped or decoder.failed:
            return i
        if self.framer.pending:
            return i
        room = decoder.cap - decoder.produced
        rest = raws[i:] if i else raws
        # The usual batch: every chunk whole, all within the cap (C-level passes, no loop).
        if all(map(bytes.endswith, rest, repeat(_WHOLE_EVENTS))) and sum(map(len, rest)) < room:
            return len(raws)
        j, size = i, 0
        while j < len(raws) and raws[j].endswith(_WHOLE_EVENTS):
            size += len(raws[j])
            if size >= room:
                break  # `feed` marks the cap
            j += 1
        return j

    def _record_plain(self, raws: list[bytes], monos: list[int], wall_offset: int) -> bool:
        """Record whole chunks of UTF-8 text with nothing to redact; False if they are not."""
        # Every step is a C-level pass over the batch (map, join): no Python code per chunk.
        try:
            texts = list(map(bytes.decode, raws))  # UTF-8, strict
        except UnicodeDecodeError:
            return False
        joined = "".join(texts)
        if self.recorder.redactor.may_redact(joined):
            return False
        self.recorder.events += count_events(joined)
        self.decoder.produced += sum(map(len, raws))
        n, count = self.n, len(raws)
        # json.encoder's C string encoder escapes as pydantic_core's to_json does (tested).
        fields = zip(
            map(add, monos, repeat(wall_offset)),
            monos,
            range(n, n + count),
            map(encode_basestring, texts),
            strict=True,
        )
        encoded = list(map(str.encode, map(self._members.__mod__, fields)))
        self.n = n + count
        self.recorder.sink.submit_encoded(encoded)
        return True

    def feed(self, raw: bytes, at: Stamp | None = None) -> None:
        """Record the events that this raw (still encoded) chunk completes."""
        was_capped = self.decoder.capped
        decoded = self.decoder.decode(raw)
        pieces = self.framer.feed(decoded)
        for piece in pieces:
            self._chunk(piece.data, unterminated=False, at=at, withheld=piece.withheld)
        if not pieces and self.decoder.capped and not was_capped:
            self._chunk(b"", unterminated=False, at=at)

    def end(self, how: StreamEndHow, error: str | None = None, at: Stamp | None = None) -> None:
        """Record the unterminated tail, if any, and how the HTTP response ended."""
        if self.ended:
            return
        self.ended = True
        tail = self.framer.flush()
        if tail.data or tail.withheld:
            self._chunk(tail.data, unterminated=True, at=at, withheld=tail.withheld)
        error = with_decode_error(error, self.decoder.failed)
        self.recorder.stream_end(self.flow, how, error, at=at)

    def _chunk(
        self, data: bytes, *, unterminated: bool, at: Stamp | None, withheld: int = 0
    ) -> None:
        rec = self.recorder
        rec.events += count_events(data)
        data = rec.redacted(data)
        record = _stamp("chunk", at)
        record["flow"] = self.flow
        record["n"] = self.n
        record["content_encoding"] = self.content_encoding
        # `withheld`: the rest of an oversized event, not recorded.
        record["data"] = body_from_bytes(data, dropped=withheld)
        if self.decoder.capped:
            record["decompress_capped"] = True
        if unterminated:
            record["unterminated"] = True
        self.n += 1
        rec.sink.submit(record)


class Recorder:
    """Builds records from HTTP exchanges and hands them, redacted, to the sink."""

    def __init__(
        self,
        sink: Sink,
        redactor: Redactor,
        *,
        replica_header: str | None = None,
        body_cap: int = DEFAULT_BODY_CAP,
        event_cap: int = DEFAULT_EVENT_CAP,
        redacted_event_cap: int = DEFAULT_REDACTED_EVENT_CAP,
        decode_cap: int = DEFAULT_DECODE_CAP,
    ) -> None:
        self.sink = sink
        self.redactor = redactor
        self.replica_header = replica_header
        self.body_cap = body_cap
        self.event_cap = event_cap
        self.redacted_event_cap = redacted_event_cap
        self.decode_cap = decode_cap
        # For the stats line and metrics (`analyzer.capture.health`): counts, no content.
        self.exchanges = 0
        self.events = 0

    def _headers(self, headers: Headers) -> list[tuple[str, str]]:
        out, count = self.redactor.headers(list(headers))
        if count:
            self.sink.count_redacted(count)
        return out

    def redacted(self, data: bytes) -> bytes:
        """Bytes of a body or of SSE events with their credentials redacted (and counted)."""
        if not self.redactor.enabled or not data:
            return data
        text, count = self.redactor.text(data.decode("utf-8", "surrogateescape"))
        if not count:
            return data
        self.sink.count_redacted(count)
        return text.encode("utf-8", "surrogateescape")

    def _body(
        self, body: bytes | None, dropped: int = 0, decode_error: str | None = None
    ) -> dict[str, object] | None:
        if body is None:
            return None
        return body_from_bytes(
            self.redacted(body), self.body_cap, dropped=dropped, decode_error=decode_error
        )

    def request(
        self,
        flow: str,
        *,
        method: str,
        scheme: str,
        authority: str,
        path: str,
        http_version: str,
        headers: Headers,
        client: str,
        upstream: str | None,
        body: bytes | None,
        body_dropped: int = 0,
        body_decode_error: str | None = None,
        at: Stamp | None = None,
    ) -> None:
        """Record a request with its (decoded) body.

        `body_dropped` counts bytes of the body that the proxy did not keep (past its bound):
        they add to the body's `truncated_bytes`, as a response's do. `body_decode_error` says
        why the body is recorded still encoded (its Content-Encoding could not be undone).
        """
        self.exchanges += 1
        path, count = self.redactor.path(path)
        if count:
            self.sink.count_redacted(count)
        record = _stamp("request", at)
        record.update(
            flow=flow,
            method=method,
            scheme=scheme,
            authority=authority,
            path=path,
            http_version=http_version,
            headers=self._headers(headers),
            client=client,
            upstream=upstream,
            body=self._body(body, body_dropped, body_decode_error),
        )
        self.sink.submit(record)

    def response(
        self,
        flow: str,
        *,
        status: int,
        http_version: str,
        headers: Headers,
        upstream: str | None,
        body: bytes | None,
        streamed: bool,
        body_dropped: int = 0,
        body_decode_error: str | None = None,
        at: Stamp | None = None,
    ) -> StreamTap | None:
        """Record a response; a streamed one returns the tap that records its chunks.

        `body_dropped` counts bytes of the body that the proxy did not keep (past its bound):
        they add to the body's `truncated_bytes`; `body_decode_error`: as for a request.
        """
        replica: str | None = None
        source: str | None = None
        if self.replica_header:
            replica = header_value(headers, self.replica_header)
            source = "header" if replica is not None else None
        if replica is None and upstream is not None:
            replica, source = upstream, "upstream"
        record = _stamp("response", at)
        record.update(
            flow=flow,
            status=status,
            http_version=http_version,
            headers=self._headers(headers),
            replica=replica,
            replica_source=source,
            streamed=streamed,
            body=None if streamed else self._body(body, body_dropped, body_decode_error),
        )
        self.sink.submit(record)
        if not streamed:
            return None
        return StreamTap(self, flow, header_value(headers, "content-encoding"))

    def stream_end(
        self, flow: str, how: StreamEndHow, error: str | None = None, at: Stamp | None = None
    ) -> None:
        """Record how an HTTP response ended (or why none came)."""
        record = _stamp("stream_end", at)
        record.update(flow=flow, how=how, error=error)
        self.sink.submit(record)

    def server_unreachable(
        self, upstream: str, error: str, flow: str | None = None, at: Stamp | None = None
    ) -> None:
        """Record a failed connection to the upstream."""
        record = _stamp("server_unreachable", at)
        record.update(upstream=upstream, error=error, flow=flow)
        self.sink.submit(record)
