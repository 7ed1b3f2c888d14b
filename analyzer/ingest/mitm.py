"""Reader of mitmproxy dumps (`mitmdump -w`, `.mitm`), as the records a capture would hold.

The only analyzer module that imports mitmproxy, lazily (DESIGN.md §3). A flow becomes a
request, a response, its body as one chunk when it is an event stream (timed at the end of the
response: a dump keeps no per-event times), and a stream_end. A body mitmproxy streamed through
(`stream_large_bodies`, or an addon setting `flow.response.stream`) is not in the dump: such a
response is marked `body_missing` and counted in the input's warnings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
)
from analyzer.ingest.jsonl import record_problem
from analyzer.records import body_from_bytes
from analyzer.schema import INT64_END

__all__ = ["read_mitm"]


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
        authority=request.authority or request.pretty_host,
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


def _records(
    path: Path, counts: Counter[str], progress: Progress | None = None
) -> Iterator[dict[str, Any]]:
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    make = RecordMaker()
    flows: list[tuple[Any, int]] = []  # (flow, the bytes it took in the dump)
    meter = HalfMeter(path.stat().st_size, progress)
    with path.open("rb") as fh:
        try:
            before = 0
            for flow in io.FlowReader(fh).stream():
                after = fh.tell()
                if isinstance(flow, http.HTTPFlow):
                    flows.append((flow, after - before))
                meter.read(after)
                before = after
        except FlowReadException as e:
            if not flows:
                raise UnreadableInput(f"{path}: not a mitmproxy dump ({e})") from e
            counts["mitm_bad_flow"] += 1  # a torn tail: keep what was read
    if not flows:
        counts["empty_input"] += 1  # an empty file, or one holding no HTTP flow
    flows.sort(key=lambda item: _started(item[0]))
    for flow, size in flows:
        meter.handled(size)
        try:
            records = list(_flow_records(flow, make, counts))
        except (AttributeError, TypeError, ValueError, OverflowError):
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
        raise UnreadableInput(f"{path}: {e.strerror or e}") from e
    counts.update(normalized)
    return finished_report(path, "mitm", records, counts)
