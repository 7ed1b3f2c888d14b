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
)
from analyzer.records import body_from_bytes

__all__ = ["read_har"]

_EPOCH_2001_S = 978_307_200

HAR_CLIENT = "har"
"""The client address every HAR entry gets (HAR does not record it)."""


def _ns(started: str) -> int:
    """ISO 8601 (HAR `startedDateTime`) to ns since the epoch."""
    moment = datetime.fromisoformat(started.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


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
    total_ms = entry.get("time")
    ended = started + int(max(float(total_ms or 0), 0.0) * 1_000_000)
    error = entry.get("_error") if isinstance(entry.get("_error"), str) else None
    if not isinstance(status, int) or status <= 0:
        yield make.make("stream_end", ended, flow=flow, how="error", error=error or "no response")
        return
    timings = entry.get("timings") or {}
    waited = sum(
        float(timings.get(k) or 0)
        for k in ("blocked", "dns", "connect", "send", "wait")
        if isinstance(timings.get(k), int | float) and float(timings.get(k) or 0) > 0
    )
    responded = started + int(waited * 1_000_000)
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
            times = [m.get("time") for m in items]
            first = next((t for t in times if isinstance(t, int | float)), None)
            for n, message in enumerate(items):
                block, last_id = _sse_block(message, last_id)
                at = times[n]
                if not isinstance(at, int | float) or first is None:
                    ts = ended
                elif first > _EPOCH_2001_S:
                    ts = int(float(at) * 1e9)  # wall clock seconds
                else:
                    # A monotonic clock (DevTools' own): keep the spacing, from the response.
                    ts = responded + int((float(at) - float(first)) * 1e9)
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
    har: dict[str, Any], tag: str, counts: Counter[str], meter: HalfMeter
) -> Iterator[dict[str, Any]]:
    entries = har["log"]["entries"]
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
        except (KeyError, TypeError, ValueError, AttributeError):
            counts["har_bad_entry"] += 1
            continue
        yield from records
    meter.done()


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
        raise UnreadableInput(f"{path}: {e.strerror or e}") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise UnreadableInput(f"{path}: not a HAR file ({e})") from e
    if not (isinstance(har, dict) and isinstance(har.get("log", {}).get("entries"), list)):
        raise UnreadableInput(f"{path}: not a HAR file (no log.entries)")
    del raw
    meter.read(meter.total)
    tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    counts: Counter[str] = Counter()
    records, normalized = normalize_to_parts(
        _records(har, tag, counts, meter),
        out_dir,
        "h",
        replica_header=replica_header,
        client_header=client_header,
    )
    counts.update(normalized)
    return finished_report(path, "har", records, counts)
