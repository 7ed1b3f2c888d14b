"""Reader of HAR 1.2 files (browser and tool exports), as the records a capture would hold.

Spec: http://www.softwareishard.com/blog/har-12-spec/ . Each entry becomes a request, a
response (unless the browser got none: status 0), the SSE chunks, and a stream_end. An SSE
response's events come from Chrome's `_eventSourceMessages` extension when present (one chunk
per message at its own `time`; the message's `eventId` is the EventSource's last event ID, so an
`id:` line is written only where it changes), else from `response.content.text` (one chunk at
the end of the entry). What a HAR cannot say is left null: the client address (HAR has none;
every entry counts as client "har"), seq gaps, how a stream ended beyond Chrome's `_error`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
from analyzer.normalize import json_number
from analyzer.records import body_from_bytes
from analyzer.schema import INT64_END

__all__ = ["read_har"]

_EPOCH_2001_S = 978_307_200
# Times are ns since the epoch in Int64 columns (the years 1677 to 2262): within INT64_END.

HAR_CLIENT = "har"
"""The client address every HAR entry gets (HAR does not record it)."""


def _ns(started: object) -> int:
    """ISO 8601 (HAR `startedDateTime`) to ns since the epoch; ValueError when it is no such
    text or names a moment past the ns range."""
    if not isinstance(started, str):
        raise ValueError("startedDateTime is not a string")
    moment = datetime.fromisoformat(started.replace("Z", "+00:00"))
    ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
    if not -INT64_END <= ns < INT64_END:
        raise ValueError("startedDateTime is out of range")
    return ns


def _span_ns(ms: float) -> int:
    """A duration in ms (finite) as ns; ValueError past the ns range."""
    ns = ms * 1_000_000
    if not -INT64_END < ns < INT64_END:
        raise ValueError("a duration is out of range")
    return int(ns)


def _headers(items: object) -> list[list[str]]:
    if not isinstance(items, list):
        return []
    return [
        [str(h["name"]), str(h.get("value", ""))]
        for h in items
        if isinstance(h, dict) and "name" in h
    ]


def _header(headers: list[list[str]], name: str) -> str | None:
    name = name.lower()
    return next((v for k, v in headers if k.lower() == name), None)


def _content_bytes(content: dict[str, Any]) -> bytes | None:
    text = content.get("text")
    if not isinstance(text, str):
        return None
    if content.get("encoding") == "base64":
        return base64.b64decode(text)
    return text.encode("utf-8", "surrogatepass")


def _sse_block(message: dict[str, Any], previous_id: str) -> tuple[str, str]:
    """An event-stream block for one `_eventSourceMessages` item, and the id after it."""
    lines = []
    event_id = message.get("eventId")
    current = previous_id
    if isinstance(event_id, str) and event_id != previous_id:
        lines.append(f"id: {event_id}")
        current = event_id
    name = message.get("eventName")
    if isinstance(name, str) and name and name != "message":
        lines.append(f"event: {name}")
    data = message.get("data")
    for line in (data if isinstance(data, str) else "").split("\n"):
        lines.append(f"data: {line}")
    return "\n".join(lines) + "\n\n", current


def _message_ns(offset_ns: float, base: int, fallback: int) -> int:
    """`base` plus a message's time offset, or `fallback` when that is past the ns range."""
    if not -INT64_END < offset_ns < INT64_END:  # NaN fails too
        return fallback
    ts = base + int(offset_ns)
    return ts if -INT64_END <= ts < INT64_END else fallback


def _entry_records(
    entry: dict[str, Any], flow: str, make: RecordMaker, counts: Counter[str]
) -> Iterator[dict[str, Any]]:
    request = entry["request"]
    response = entry.get("response") or {}
    started = _ns(entry["startedDateTime"])
    url = urlsplit(str(request["url"]))
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    req_headers = _headers(request.get("headers"))
    post = request.get("postData") or {}
    body = None
    if isinstance(post.get("text"), str):
        body = body_from_bytes(post["text"].encode("utf-8", "surrogatepass"))
    server = entry.get("serverIPAddress")
    upstream = str(server) if server else None
    yield make.make(
        "request",
        started,
        flow=flow,
        method=str(request.get("method", "GET")),
        scheme=url.scheme or "http",
        authority=url.netloc,
        path=path,
        http_version=str(request.get("httpVersion", "")),
        headers=req_headers,
        client=HAR_CLIENT,
        upstream=upstream,
        body=body,
    )
    status = response.get("status")
    # `time` is the entry's total: absent counts as 0, anything but a finite number makes the
    # entry malformed (float() raises on text, not a number, past the float range).
    total_ms = float(entry.get("time") or 0)
    if not math.isfinite(total_ms):
        raise ValueError("time is not a finite number")
    ended = started + _span_ns(max(total_ms, 0.0))
    error = entry.get("_error") if isinstance(entry.get("_error"), str) else None
    if not isinstance(status, int) or status <= 0:
        yield make.make("stream_end", ended, flow=flow, how="error", error=error or "no response")
        return
    timings = entry.get("timings") or {}
    # A phase that is no positive finite number does not apply (HAR writes -1 for that).
    phases = (json_number(timings.get(k)) for k in ("blocked", "dns", "connect", "send", "wait"))
    waited = sum(ms for ms in phases if ms is not None and ms > 0)
    responded = started + _span_ns(waited)  # a sum past the ns range: a malformed entry
    resp_headers = _headers(response.get("headers"))
    content = response.get("content") or {}
    media = _header(resp_headers, "content-type") or str(content.get("mimeType") or "")
    sse = media.split(";", 1)[0].strip().lower() == "text/event-stream"
    raw = _content_bytes(content) if isinstance(content, dict) else None
    yield make.make(
        "response",
        responded,
        flow=flow,
        status=status,
        http_version=str(response.get("httpVersion", "")),
        headers=resp_headers,
        replica=upstream,
        replica_source="upstream" if upstream else None,
        streamed=sse,
        body=None if sse or raw is None else body_from_bytes(raw),
    )
    if sse:
        messages = entry.get("_eventSourceMessages")
        if isinstance(messages, list) and messages:
            last_id = ""
            items = [m for m in messages if isinstance(m, dict)]
            # A message's time that is no finite number, or lands past the ns range, is as
            # if absent: the message is timed at the end of the entry.
            times = [json_number(m.get("time")) for m in items]
            first = next((t for t in times if t is not None), None)
            for n, message in enumerate(items):
                block, last_id = _sse_block(message, last_id)
                at = times[n]
                if at is None or first is None:
                    ts = ended
                elif first > _EPOCH_2001_S:
                    ts = _message_ns(at * 1e9, 0, ended)  # wall clock seconds
                else:
                    # A monotonic clock (DevTools' own): keep the spacing, from the response.
                    ts = _message_ns((at - first) * 1e9, responded, ended)
                yield make.make(
                    "chunk",
                    ts,
                    flow=flow,
                    n=n,
                    content_encoding=None,
                    data=body_from_bytes(block.encode("utf-8", "surrogatepass")),
                )
        elif raw:
            yield make.make(
                "chunk", ended, flow=flow, n=0, content_encoding=None, data=body_from_bytes(raw)
            )
        else:
            counts["har_missing_text"] += 1
    how = "error" if error else "complete"
    yield make.make("stream_end", ended, flow=flow, how=how, error=error)


def _records(
    entries: list[Any], tag: str, counts: Counter[str], meter: HalfMeter
) -> Iterator[dict[str, Any]]:
    if not entries:
        counts["empty_input"] += 1
    share = meter.total // max(1, len(entries))  # what an entry took of the file, about
    make = RecordMaker()
    ordered = []
    for index, entry in enumerate(entries):
        try:
            ordered.append((_ns(entry["startedDateTime"]), index, entry))
        except (KeyError, TypeError, ValueError):
            counts["har_bad_entry"] += 1
    ordered.sort(key=lambda item: (item[0], item[1]))
    for _, index, entry in ordered:
        meter.handled(share)
        try:
            records = list(_entry_records(entry, f"har-{tag}-{index}", make, counts))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            counts["har_bad_entry"] += 1
            continue
        # What reaches the tables passes the capture records' check: times and status in
        # range, and no lone surrogate (JSON's "\udXXX") in a method, URL or header.
        if any(record_problem(record) is not None for record in records):
            counts["har_bad_entry"] += 1
            continue
        yield from records
    meter.done()


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), "a number")


def _entries(har: object) -> list[Any] | str:
    """The HAR's `log.entries`, or what is wrong with its structure."""
    if not isinstance(har, dict):
        return f"no log.entries: the file holds {_json_type(har)}, not an object"
    if "log" not in har:
        return "no log.entries: no log"
    log = har["log"]
    if not isinstance(log, dict):
        return f"no log.entries: log is {_json_type(log)}, not an object"
    if "entries" not in log:
        return "no log.entries"
    entries = log["entries"]
    if not isinstance(entries, list):
        return f"no log.entries: log.entries is {_json_type(entries)}, not an array"
    return entries


def read_har(
    path: Path,
    out_dir: Path,
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
    progress: Progress | None = None,
) -> InputReport:
    """Read a HAR file, writing the normalized tables as parts to `out_dir`.

    `progress(done, total)`: bytes of the file handled so far (`HalfMeter`: the JSON is
    loaded whole, then its entries converted)."""
    try:
        raw = path.read_bytes()
        meter = HalfMeter(len(raw), progress)
        har = json.loads(raw)
    except OSError as e:
        raise UnreadableInput(os_reason(path, e)) from e
    except ValueError as e:
        raise UnreadableInput(f"{path}: not a HAR file ({e})") from e
    except RecursionError as e:
        raise UnreadableInput(f"{path}: not a HAR file (JSON nested too deeply)") from e
    entries = _entries(har)
    if isinstance(entries, str):
        raise UnreadableInput(f"{path}: not a HAR file ({entries})")
    # Entries are named by the file's content: the same HAR under two paths gives the same
    # flow ids, which `read_inputs` reads once; two different files never share one.
    tag = hashlib.sha256(raw).hexdigest()[:12]
    del raw, har
    meter.read(meter.total)
    counts: Counter[str] = Counter()
    records, normalized = normalize_to_parts(
        _records(entries, tag, counts, meter),
        out_dir,
        "h",
        replica_header=replica_header,
        client_header=client_header,
    )
    counts.update(normalized)
    return finished_report(path, "har", records, counts)
