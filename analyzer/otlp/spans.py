"""A timeline and its findings as OpenTelemetry spans: one trace per session (issue #32).

Per session a root span; under it a CLIENT span per HTTP exchange named
`{mcp.method.name} {target}` with the MCP semantic conventions' attributes the exchange has
(OpenTelemetry GenAI semconv, `gen-ai/mcp.md`), and a span per logical stream with one child
span per incarnation. Each SSE event is a span event on its incarnation; a resume links to the
incarnation that issued its cursor (in another session's trace when the cursor came from
there); a request whose `params._meta.traceparent` names a trace links to it. Each finding is a
`seamwatch.finding` span event on the span of its first evidence, and a high one sets that
span's status to error. What the conventions lack is in the `seamwatch.*` namespace.

Times are the capture's wall clock, so the spans line up with the servers' own traces. Ids are
hashes of the capture run, session and flow ids: the same input gives the same trace.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import polars as pl
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Link, SpanKind

from analyzer.otlp.draft import Attributes, DraftSpan, hash_id, span_context
from analyzer.otlp.evidence import (
    FINDING_EVENT,
    CaptureRoots,
    Trace,
    add_finding,
    finding_rows,
    trace_order,
)
from analyzer.otlp.fields import (
    json_field,
    meta_traceparent,
    put,
    rpc_id_text,
    server_attributes,
)
from analyzer.otlp.frames import NO_SESSION, epoch, error_codes, exchange_frame, tool_results

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = [
    "FINDING_EVENT",
    "SSE_EVENT",
    "SpanDrafts",
    "batches",
    "iter_spans",
    "timeline_spans",
]

SSE_EVENT: Final = "seamwatch.sse.event"


def timeline_spans(
    timeline: Timeline, findings: pl.DataFrame, *, payloads: bool = False
) -> list[ReadableSpan]:
    """Every span of the export, session by session (a session's spans are adjacent)."""
    return list(iter_spans(timeline, findings, payloads=payloads))


def iter_spans(
    timeline: Timeline, findings: pl.DataFrame, *, payloads: bool = False
) -> Iterator[ReadableSpan]:
    """`timeline_spans` one at a time: the spans are built first, then made SDK spans as they
    are taken, so a writer that encodes each at once never holds them all."""
    drafts = SpanDrafts(timeline, payloads=payloads)
    capture = CaptureRoots(drafts.earliest())
    for row in finding_rows(findings):
        placed = drafts.evidence(row)
        add_finding(placed[1] if placed is not None else capture.root(row), row)
    traces = drafts.traces() + capture.traces()
    drafts.clear()
    return (span.freeze() for _, spans in sorted(traces, key=trace_order) for span in spans)


class SpanDrafts:
    """Every session's spans of a timeline, but the findings' events: each frame collected
    once, then one kind of span at a time. `evidence` says where a finding goes."""

    def __init__(self, timeline: Timeline, *, payloads: bool) -> None:
        self.timeline = timeline
        self.payloads = payloads
        self.spans: dict[int, DraftSpan] = {}
        self.roots: dict[str, DraftSpan] = {}
        self.flow_span: dict[str, DraftSpan] = {}
        self.stream_span: dict[str, DraftSpan] = {}
        self.incarnation_span: dict[tuple[str, int], DraftSpan] = {}
        self.trace_key: dict[str, str] = {}
        self.session_value: dict[str, str | None] = {}
        frame = exchange_frame(timeline, payloads=payloads)
        self._sessions(frame)
        self._exchange_spans(frame)
        self._stream_spans()
        self._incarnation_spans()
        self._resume_links()
        self._sse_events()

    def earliest(self) -> int | None:
        """The start of the earliest session."""
        return min((root.start for root in self.roots.values()), default=None)

    def evidence(self, finding: Mapping[str, Any]) -> tuple[int, DraftSpan] | None:
        """The span of a finding's first evidence: its first flow's exchange, else its first
        stream, else its session's root; with its rank (the place of that evidence in the
        finding's, flows first). None when the timeline holds none (`CaptureRoots`)."""
        flow_ids = finding["flow_ids"] or ()
        for rank, flow_id in enumerate(flow_ids):
            if flow_id in self.flow_span:
                return rank, self.flow_span[flow_id]
        stream_ids = finding["stream_ids"] or ()
        for rank, stream_id in enumerate(stream_ids, start=len(flow_ids)):
            if stream_id in self.stream_span:
                return rank, self.stream_span[stream_id]
        session = finding["session"] or NO_SESSION
        if session in self.roots:
            return len(flow_ids) + len(stream_ids), self.roots[session]
        return None

    def traces(self) -> list[Trace]:
        """Each session's trace, its spans by start (a parent before its children)."""
        by_trace: dict[int, list[DraftSpan]] = defaultdict(list)
        for span in self.spans.values():
            by_trace[span.trace_id].append(span)
        return [
            (root, sorted(by_trace[root.trace_id], key=lambda s: (s.start, s.depth, s.name)))
            for root in self.roots.values()
        ]

    def clear(self) -> None:
        """Let go of the spans (`traces` holds them)."""
        self.spans.clear()
        self.flow_span.clear()
        self.stream_span.clear()
        self.incarnation_span.clear()

    # -- sessions ---------------------------------------------------------------------------

    def _sessions(self, exchanges: pl.DataFrame) -> None:
        runs = (
            exchanges.group_by("session_id", maintain_order=True)
            .agg(
                pl.col("run_id").first(),
                pl.col("ts").min(),
                pl.max_horizontal("ts", "response_ts", "end_ts").max().alias("end_ts"),
            )
            .rows(named=True)
        )
        sessions = {
            row["session_id"]: row
            for row in epoch(self.timeline.sessions, "start", "last_ts", "end_ts")
            .collect()
            .rows(named=True)
        }
        for run in runs:
            key = run["session_id"]
            self.trace_key[key] = f"{run['run_id'] or ''}\x00{key}"
            info = sessions.get(key, {})
            start = info.get("start") or run["ts"]
            end = max(v for v in (info.get("last_ts"), run["end_ts"], start) if v is not None)
            kind = info.get("kind")
            # Only the eras with sessions have an id for `mcp.session.id`: Mcp-Session-Id, and
            # the legacy transport's session query value. `anon:` and `client:` keys are
            # seamwatch's own grouping of sessionless traffic.
            # A key of several origins' analysis ends with `@<origin>` (`analyzer.timeline.keys`).
            origin = info.get("origin")
            plain = key.removesuffix(f"@{origin}") if origin else key
            value = plain.split(":", 1)[1] if kind in ("mcp", "legacy") else None
            self.session_value[key] = value
            attributes: Attributes = {"seamwatch.session.key": key}
            era = info.get("era")
            put(
                attributes,
                {
                    "mcp.session.id": value,
                    "seamwatch.session.kind": kind,
                    "mcp.protocol.version": era if era and era != "unknown" else None,
                    "seamwatch.session.end": info.get("end_how"),
                    "seamwatch.client.info": info.get("client_info"),
                    "client.address": info.get("client_ip"),
                    "seamwatch.server": info.get("server"),
                },
            )
            root = self._new(key, "session", key, name="mcp session", start=start, end=end)
            root.attributes.update(attributes)
            self.roots[key] = root

    def _new(
        self,
        session: str,
        kind: str,
        key: str,
        *,
        name: str,
        start: int,
        end: int,
        parent: DraftSpan | None = None,
    ) -> DraftSpan:
        trace_key = self.trace_key[session]
        span = DraftSpan(
            name=name,
            trace_id=hash_id(128, trace_key),
            span_id=hash_id(64, trace_key, kind, key),
            parent_id=None if parent is None else parent.span_id,
            start=start,
            end=end,
            depth=0 if parent is None else parent.depth + 1,
        )
        self.spans[span.span_id] = span
        return span

    # -- exchanges --------------------------------------------------------------------------

    def _exchange_spans(self, exchanges: pl.DataFrame) -> None:
        errors = error_codes(self.timeline)
        results = tool_results(self.timeline) if self.payloads else {}
        for row in exchanges.iter_rows(named=True):
            session = row["session_id"]
            start = row["ts"]
            end = row["end_ts"] or row["response_ts"] or start
            method = row["rpc_method"]
            target = row["tool_name"] if method == "tools/call" else None
            if method:
                name = f"{method} {target}" if target else method
            else:
                name = f"{row['method']} {row['path']}"
            span = self._new(
                session,
                "flow",
                row["flow_id"],
                name=name,
                start=start,
                end=end,
                parent=self.roots[session],
            )
            span.kind = SpanKind.CLIENT
            self.flow_span[row["flow_id"]] = span
            a = span.attributes
            request_id = rpc_id_text(row["rpc_id"]) if row["rpc_kind"] == "request" else None
            put(
                a,
                {
                    "mcp.method.name": method,
                    "jsonrpc.request.id": request_id,
                    "gen_ai.tool.name": target,
                    "gen_ai.operation.name": "execute_tool" if method == "tools/call" else None,
                    "mcp.session.id": self.session_value.get(session),
                    "mcp.protocol.version": row["protocol_version"]
                    or (row["era"] if row["era"] not in (None, "unknown") else None),
                    "network.protocol.name": "http",
                    "network.transport": "tcp",
                    "http.request.method": row["method"],
                    "http.response.status_code": row["status"],
                    "url.scheme": row["scheme"],
                    "url.path": row["path"],
                    "client.address": row["client_ip"],
                    "seamwatch.flow_id": row["flow_id"],
                    "seamwatch.replica": row["replica"],
                    "seamwatch.http.end": row["end_how"],
                    "seamwatch.sse.cursor": row["last_event_id"],
                    "seamwatch.stream.id": row["stream_id"],
                    "seamwatch.stream.incarnation": row["incarnation"],
                },
            )
            a.update(server_attributes(row["authority"]))
            code = errors.get(row["flow_id"])
            status = row["status"]
            if code is not None:
                a["rpc.response.status_code"] = str(code)
                a["error.type"] = str(code)
                span.error = f"JSON-RPC error {code}"
            elif status is not None and status >= 400:
                a["error.type"] = str(status)
                span.error = f"HTTP {status}"
            elif status is None:
                a["error.type"] = "no_response"
                span.error = row["unreachable"] or row["end_error"] or "no HTTP response"
            parent = meta_traceparent(row["body"])
            if parent is not None:
                span.links.append(
                    Link(span_context(*parent, remote=True), {"seamwatch.link": "traceparent"})
                )
            if self.payloads and method == "tools/call":
                put(
                    a,
                    {
                        "gen_ai.tool.call.arguments": json_field(
                            row["body"], "params", "arguments"
                        ),
                        "gen_ai.tool.call.result": results.get(row["flow_id"]),
                    },
                )

    # -- streams and incarnations -----------------------------------------------------------

    def _stream_spans(self) -> None:
        streams = epoch(self.timeline.streams, "ts", "end_ts").collect()
        for row in streams.iter_rows(named=True):
            session = row["session_id"] or NO_SESSION
            if session not in self.roots:
                continue
            start = row["ts"]
            if start is None:  # its exchange has no time (`exchange_frame`): not exported
                continue
            method = row["request_method"]
            name = f"SSE stream {method}" if row["kind"] == "post" and method else "SSE stream GET"
            span = self._new(
                session,
                "stream",
                row["stream_id"],
                name=name,
                start=start,
                end=row["end_ts"] or start,
                parent=self.roots[session],
            )
            self.stream_span[row["stream_id"]] = span
            put(
                span.attributes,
                {
                    "seamwatch.stream.id": row["stream_id"],
                    "seamwatch.stream.kind": row["kind"],
                    "seamwatch.stream.request_id": rpc_id_text(row["request_id"]),
                    "seamwatch.stream.request_method": method,
                    "seamwatch.stream.incarnations": row["incarnations"],
                    "seamwatch.stream.events": row["events"],
                    "seamwatch.stream.response_delivered": row["response_delivered"],
                    "seamwatch.stream.stale_cursor": row["stale_cursor"],
                    "seamwatch.http.end": row["last_end_how"],
                    "seamwatch.replica": row["replica"],
                },
            )

    def _incarnation_spans(self) -> None:
        incarnations = epoch(self.timeline.incarnations, "ts", "response_ts", "end_ts").collect()
        for row in incarnations.iter_rows(named=True):
            stream = self.stream_span.get(row["stream_id"])
            if stream is None or row["ts"] is None:
                continue
            session = row["session_id"] or NO_SESSION
            n = row["incarnation"]
            start = row["ts"]
            span = self._new(
                session,
                "incarnation",
                f"{row['stream_id']}\x00{n}",
                name=f"SSE incarnation {n}",
                start=start,
                end=row["end_ts"] or row["response_ts"] or start,
                parent=stream,
            )
            self.incarnation_span[(row["stream_id"], n)] = span
            put(
                span.attributes,
                {
                    "seamwatch.stream.id": row["stream_id"],
                    "seamwatch.stream.incarnation": n,
                    "seamwatch.flow_id": row["flow_id"],
                    "seamwatch.sse.cursor": row["cursor"],
                    "seamwatch.sse.last_cursor": row["last_cursor"],
                    "seamwatch.sse.retry_ms": row["last_retry_ms"],
                    "seamwatch.sse.events": row["events"],
                    "seamwatch.replica": row["replica"],
                    "seamwatch.http.end": row["end_how"],
                    "http.response.status_code": row["status"],
                },
            )
            stream.end = max(stream.end, span.end)

    def _resume_links(self) -> None:
        """Each resume's span links to the incarnation that issued its cursor."""
        resumptions = self.timeline.resumptions.select(
            "flow_id",
            "cursor",
            "status",
            "cursor_stream_id",
            "cursor_incarnation",
            "answer_stream_id",
            "answer_incarnation",
        ).collect()
        for row in resumptions.iter_rows(named=True):
            issued = self.incarnation_span.get((row["cursor_stream_id"], row["cursor_incarnation"]))
            if issued is None:
                continue
            resumed = self.incarnation_span.get(
                (row["answer_stream_id"], row["answer_incarnation"])
            ) or self.flow_span.get(row["flow_id"])
            if resumed is None:
                continue
            attributes = {
                "seamwatch.link": "resumed-from",
                "seamwatch.sse.cursor": row["cursor"],
                "seamwatch.cursor.status": row["status"],
            }
            resumed.links.append(Link(issued.context(), attributes))

    # -- SSE events ------------------------------------------------------------------------

    def _sse_events(self) -> None:
        t = self.timeline
        carried = (
            t.messages.filter((pl.col("source") == "sse") & pl.col("member").fill_null(0).eq(0))
            .select("flow_id", "ordinal", "kind", "rpc_id", "method")
            .unique(["flow_id", "ordinal"], keep="first")
        )
        events = (
            epoch(
                t.sse_events.select(
                    "stream_id",
                    "ts",
                    "flow_id",
                    "incarnation",
                    "ordinal",
                    "event_id",
                    "event",
                    "retry",
                    "id_only",
                ),
                "ts",
            )
            .join(carried, on=["flow_id", "ordinal"], how="left")
            # The frame's row order is unspecified; a span's events are sorted by time when it
            # is frozen, and those of one time (one chunk's) stay in their order on the wire.
            .sort("flow_id", "ordinal")
            .collect()
        )
        for row in events.iter_rows(named=True):
            span = self.incarnation_span.get(
                (row["stream_id"], row["incarnation"])
            ) or self.flow_span.get(row["flow_id"])
            if span is None:
                continue
            attributes: Attributes = {"seamwatch.sse.priming": bool(row["id_only"])}
            put(
                attributes,
                {
                    "seamwatch.sse.event_id": row["event_id"],
                    "seamwatch.sse.retry_ms": row["retry"],
                    "seamwatch.sse.event_type": row["event"],
                    "seamwatch.sse.ordinal": row["ordinal"],
                    "seamwatch.jsonrpc.kind": row["kind"],
                    "mcp.method.name": row["method"],
                    "jsonrpc.request.id": rpc_id_text(row["rpc_id"]),
                },
            )
            span.events.append((SSE_EVENT, attributes, row["ts"]))


def batches(spans: Iterable[ReadableSpan], size: int) -> Iterator[list[ReadableSpan]]:
    """The spans in batches of about `size`, a trace never split unless it alone is larger."""
    batch: list[ReadableSpan] = []
    trace: int | None = None
    for span in spans:
        span_trace = span.context.trace_id if span.context else None
        if len(batch) >= size and span_trace != trace:
            yield batch
            batch = []
        batch.append(span)
        trace = span_trace
    if batch:
        yield batch
