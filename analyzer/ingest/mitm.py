"""Reader of mitmproxy dumps (`mitmdump -w`, `.mitm`), as the records a capture would hold.

The only analyzer module that imports mitmproxy, lazily (DESIGN.md §3). A flow becomes a
request, a response, its body as one chunk when it is an event stream (timed at the end of the
response: a dump keeps no per-event times), and a stream_end. A body mitmproxy streamed through
(`stream_large_bodies`, or an addon setting `flow.response.stream`) is not in the dump: such a
response is marked `body_missing` and counted in the input's warnings.

A dump is hostile input: mitmproxy's reader trusts a frame's length prefix (`99999999999:`
asks for 100 GB) and recurses once per nesting level. So each tnetstring frame is cut here
first, its length checked against the bytes the file still holds and its nesting walked
without recursion to a bounded depth, and only a frame that passes is handed to mitmproxy.
A frame that is well cut but is no flow is skipped (`mitm_bad_flow`); damage to the framing
itself ends the read there (`mitm_damaged`), keeping every flow before it. A file with no
readable flow at all is `UnreadableInput`.
"""

from __future__ import annotations

import io as stdio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from analyzer.capture.framing import (
    DEFAULT_DECODE_CAP,
    Decoded,
    decode_body,
    with_decode_error,
)
from analyzer.capture.recorder import DEFAULT_BODY_CAP
from analyzer.ingest.common import (
    HalfMeter,
    InputReport,
    Progress,
    RecordMaker,
    UnreadableInput,
    finished_report,
    normalize_to_parts,
    os_reason,
)
from analyzer.ingest.jsonl import record_problem
from analyzer.records import body_from_bytes
from analyzer.schema import INT64_END

__all__ = ["FrameError", "check_frame", "read_mitm"]

#: Containers nested deeper than this are damage: a flow's state nests about six levels.
MAX_DEPTH: Final = 64
# tnetstring's own bound on a length prefix (`tnetstring.load`).
_MAX_PREFIX_DIGITS: Final = 12
_CONTAINERS: Final = frozenset(b"}]")
_SCALARS: Final = frozenset(b",;#^!~")


class FrameError(ValueError):
    """A tnetstring frame that cannot be cut or walked safely: the dump is damaged there."""


def _ns(seconds: float | None, fallback: int) -> int:
    """A mitmproxy timestamp (seconds) as ns, `fallback` when unset; ValueError when it is no
    finite number in the ns range (the flow is unreadable)."""
    if not seconds:
        return fallback
    ns = seconds * 1e9
    # ns since the epoch in an Int64 column (the years 1677 to 2262); infinities and NaN fail
    if not -INT64_END < ns < INT64_END:
        raise ValueError(f"timestamp {seconds!r} is out of range")
    return int(ns)


def _started(flow: Any) -> float:
    """The sort key of a flow: its request's start, 0 when that is not a number."""
    started = flow.request.timestamp_start
    if isinstance(started, int | float) and not isinstance(started, bool) and started == started:
        return started
    return 0.0


def _address(peer: Any) -> str | None:
    if not peer:
        return None
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _headers(headers: Any) -> list[list[str]]:
    return [[k.decode("utf-8", "replace"), v.decode("utf-8", "replace")] for k, v in headers.fields]


def _content(message: Any, cap: int) -> Decoded | None:
    """A message's body undone from its Content-Encoding within `cap` (a bomb in a dump costs
    its head only), as the proxy does; None when the dump kept no body."""
    raw: bytes | None = message.raw_content
    if raw is None:
        return None
    return decode_body(raw, message.headers.get("content-encoding"), cap=cap)


def _body(content: Decoded | None) -> dict[str, object] | None:
    if content is None:
        return None
    return body_from_bytes(content.body, dropped=content.dropped, decode_error=content.error)


def _flow_records(flow: Any, make: RecordMaker, counts: Counter[str]) -> Iterator[dict[str, Any]]:
    request = flow.request
    flow_id = str(flow.id)
    started = _ns(request.timestamp_start, 0)
    body = _content(request, DEFAULT_BODY_CAP)
    yield make.make(
        "request",
        started,
        flow=flow_id,
        method=request.method,
        scheme=request.scheme,
        authority=request.authority or request.host_header or request.pretty_host,  # with its port
        path=request.path,
        http_version=request.http_version,
        headers=_headers(request.headers),
        client=_address(getattr(flow.client_conn, "peername", None)) or "",
        upstream=_address(getattr(flow.server_conn, "peername", None)),
        body=_body(body),
    )
    response = flow.response
    error = flow.error.msg if flow.error is not None else None
    if response is None:
        ended = _ns(flow.error.timestamp if flow.error else None, started)
        yield make.make("stream_end", ended, flow=flow_id, how="error", error=error)
        return
    headers = _headers(response.headers)
    media = next((v for k, v in headers if k.lower() == "content-type"), "")
    sse = media.split(";", 1)[0].strip().lower() == "text/event-stream"
    content = _content(response, DEFAULT_DECODE_CAP if sse else DEFAULT_BODY_CAP)
    missing = response.raw_content is None and response.status_code not in (202, 204, 304)
    if missing:
        counts["body_missing"] += 1
    upstream = _address(getattr(flow.server_conn, "peername", None))
    responded = _ns(response.timestamp_start, started)
    yield make.make(
        "response",
        responded,
        flow=flow_id,
        status=response.status_code,
        http_version=response.http_version,
        headers=headers,
        replica=upstream,
        replica_source="upstream" if upstream else None,
        streamed=sse,
        body=None if sse else _body(content),
        body_missing=missing,
    )
    ended = _ns(response.timestamp_end, responded)
    end_error = error
    if sse and content is not None:
        if content.error:  # not decoded: no events; said at the stream's end, as the proxy does
            end_error = with_decode_error(error, content.error)
        elif content.body:
            yield make.make(
                "chunk", ended, flow=flow_id, n=0, content_encoding=None,
                data=body_from_bytes(content.body, dropped=content.dropped),
            )  # fmt: skip
    how = "error" if error else "complete" if response.timestamp_end else "open_at_shutdown"
    yield make.make("stream_end", ended, flow=flow_id, how=how, error=end_error)


def check_frame(frame: bytes, max_depth: int = MAX_DEPTH) -> None:
    """FrameError unless `frame` is exactly one tnetstring whose every length stays inside its
    container and whose containers nest at most `max_depth` deep; walked without recursion."""
    ends: list[int] = []  # where the data of each open container ends (its type tag)
    pos, size = 0, len(frame)
    while True:
        limit = ends[-1] if ends else size
        if pos == limit:
            if not ends:
                return
            ends.pop()
            pos += 1  # past the container's type tag
            continue
        if not ends and pos:
            raise FrameError(f"bytes after the frame at {pos}")
        colon = frame.find(b":", pos, min(limit, pos + _MAX_PREFIX_DIGITS + 1))
        if colon <= pos or not frame[pos:colon].isdigit():
            raise FrameError(f"no length prefix at byte {pos}")
        tag_at = colon + 1 + int(frame[pos:colon])
        if tag_at >= limit:
            raise FrameError(f"a length at byte {pos} runs past its container")
        tag = frame[tag_at]
        if tag in _CONTAINERS:
            if len(ends) >= max_depth:
                raise FrameError(f"nested deeper than {max_depth} levels")
            ends.append(tag_at)
            pos = colon + 1
        elif tag in _SCALARS:
            pos = tag_at + 1
        else:
            raise FrameError(f"unknown type tag {tag:#x} at byte {tag_at}")


def _next_frame(fh: BinaryIO, remaining: int) -> bytes | None:
    """The next whole tnetstring frame of the dump, None at its end; FrameError when its
    length prefix is missing, or asks for more bytes than the file still holds."""
    digits = b""
    c = fh.read(1)
    if not c:
        return None
    while c.isdigit() and len(digits) <= _MAX_PREFIX_DIGITS:
        digits += c
        c = fh.read(1)
    if c != b":" or not digits or len(digits) > _MAX_PREFIX_DIGITS:
        raise FrameError("no length prefix")
    length = int(digits)
    if length + 1 > remaining - len(digits) - 1:
        raise FrameError(f"a frame of {length} bytes where {remaining} remain")
    body = fh.read(length + 1)
    if len(body) < length + 1:
        raise FrameError("the file ended inside a frame")
    frame = digits + b":" + body
    check_frame(frame)
    return frame


def _read_flows(
    path: Path, fh: BinaryIO, counts: Counter[str], meter: HalfMeter
) -> list[tuple[Any, int]]:
    """The dump's HTTP flows with the bytes each took, in file order; damage counted."""
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    size = path.stat().st_size
    head = fh.read(4)
    fh.seek(0)
    if head.startswith((b"{", b"\xef\xbb\xbf{")):
        # mitmproxy reads a HAR given as a dump (as JSON: depth-safe, it fails cleanly).
        try:
            return [(f, 0) for f in io.FlowReader(fh).stream() if isinstance(f, http.HTTPFlow)]
        except FlowReadException as e:
            raise UnreadableInput(f"{path}: not a mitmproxy dump ({e})") from e
    flows: list[tuple[Any, int]] = []  # (flow, the bytes it took in the dump)
    before = 0
    while True:
        try:
            frame = _next_frame(fh, size - before)
        except FrameError as e:
            if not flows:
                raise UnreadableInput(f"{path}: not a mitmproxy dump ({e} at byte {before})") from e
            counts["mitm_damaged"] += 1  # the rest cannot be framed: keep what came before
            break
        if frame is None:
            break
        after = before + len(frame)
        try:
            loaded = list(io.FlowReader(stdio.BytesIO(frame)).stream())
        except Exception:  # a well-cut frame that is no flow: mitmproxy may raise anything
            counts["mitm_bad_flow"] += 1
        else:
            flows += [(f, after - before) for f in loaded if isinstance(f, http.HTTPFlow)]
        meter.read(after)
        before = after
    if counts["mitm_bad_flow"] and not flows:
        raise UnreadableInput(f"{path}: not a mitmproxy dump (no readable flow)")
    return flows


def _records(
    path: Path, counts: Counter[str], progress: Progress | None = None
) -> Iterator[dict[str, Any]]:
    make = RecordMaker()
    meter = HalfMeter(path.stat().st_size, progress)
    with path.open("rb") as fh:
        flows = _read_flows(path, fh, counts, meter)
    if not flows:
        counts["empty_input"] += 1  # an empty file, or one holding no HTTP flow
    flows.sort(key=lambda item: _started(item[0]))
    for flow, size in flows:
        meter.handled(size)
        try:
            records = list(_flow_records(flow, make, counts))
        except Exception:  # a state mitmproxy accepted but no flow we can read: skip it alone
            counts["mitm_bad_flow"] += 1
            continue
        # What reaches the tables passes the capture records' check: times and status in
        # range, and no lone surrogate, which mitmproxy makes of bytes that are not UTF-8 in
        # a method, path or authority (it decodes them with "surrogateescape").
        if any(record_problem(record) is not None for record in records):
            counts["mitm_bad_flow"] += 1
            continue
        yield from records
    meter.done()


def read_mitm(
    path: Path,
    out_dir: Path,
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    progress: Progress | None = None,
) -> InputReport:
    """Read a mitmproxy dump, writing the normalized tables as parts to `out_dir`.

    `progress(done, total)`: bytes of the dump handled so far (`HalfMeter`)."""
    counts: Counter[str] = Counter()
    try:
        records, normalized = normalize_to_parts(
            _records(path, counts, progress),
            out_dir,
            "m",
            replica_header=replica_header,
            client_header=client_header,
        )
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    counts.update(normalized)
    return finished_report(path, "mitm", records, counts)
