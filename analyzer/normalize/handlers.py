"""Record handlers: each record kind (request, response, chunk, stream_end, ...) taken into the
per-flow state and the column lists of the normalized tables.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from analyzer import schema as S
from analyzer.normalize.columns import Columns, Rows
from analyzer.normalize.describe import (
    MEMO_MAX,
    Described,
    MsgRow,
    ToolRow,
    bytes_hash,
    describe_payload,
)
from analyzer.normalize.flow import (
    MCP_HEADER_PREFIXES,
    FlowState,
    client_ip,
    media_type,
)
from analyzer.sse import SseDecoder, SseEvent

_json_list = json.JSONEncoder(ensure_ascii=False).encode
# Ended flows remembered to tell a later record of one apart (duplicate or late): the most
# recent ones only, so that a Live tail running for days does not grow with every flow. A
# record of a flow that ended longer ago (only a damaged capture has one) starts a flow of its
# own, without a request.
_ENDED_MAX = 100_000

# How `analyzer.capture.framing.ContentDecoder` words a stream it could not decode (the proxy
# records it as the stream's end error; tests/test_normalize.py ties the two together).
DECODE_FAILURE: Final = re.compile(r"content decoding failed|unsupported content-encoding")


class RecordHandlers:
    """The normalizer's per-record state and handlers: each record kind taken into the flow
    state and the column lists (`Normalizer` adds the batches, the bulk lane and the output)."""

    def __init__(self, *, replica_header: str | None, client_header: str | None) -> None:
        self.replica_header = replica_header.lower() if replica_header else None
        self.client_header_override = client_header.lower() if client_header else None
        self.client_header = self.client_header_override
        self.run_id: str | None = None
        self.counts: Counter[str] = Counter()
        self.records = 0
        self._flows: dict[str, FlowState] = {}
        self._ended: dict[str, int] = {}  # flow id -> chunks taken, for flows already written
        self._flow_cols = Columns(S.RAW_FLOWS)
        self._event_cols = Rows(S.RAW_EVENTS)
        self._message_cols = Rows(S.RAW_MESSAGES)
        self._tool_cols = Columns(S.RAW_TOOLS)
        self._payload_cols = Columns(S.PAYLOADS)
        self._ev = self._event_cols.append
        self._msg = self._message_cols.append
        self._tool = self._tool_cols.appenders()
        self._payload = self._payload_cols.appenders()
        self._seen_payloads: set[str] = set()
        self._memo: dict[str, Described] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "capture_open": self._capture_open,
            "request": self._request,
            "response": self._response,
            "chunk": self._chunk,
            "stream_end": self._stream_end,
            "server_unreachable": self._server_unreachable,
        }

    # -- records ----------------------------------------------------------------------------

    def set_run(self, run_id: str | None, client_header: str | None) -> None:
        """Records that follow belong to this capture run (recorded with this client header)."""
        self.run_id = run_id
        self.client_header = self.client_header_override or (
            client_header.lower() if client_header else None
        )

    def _capture_open(self, record: dict[str, Any]) -> None:
        header = record.get("client_header")
        self.set_run(record.get("run_id"), header if isinstance(header, str) else None)

    def _flow(self, flow_id: str) -> FlowState | None:
        """The flow's state; None once its stream_end was taken (its row is out)."""
        flow = self._flows.get(flow_id)
        if flow is None:
            if flow_id in self._ended:
                return None
            flow = self._flows[flow_id] = FlowState(flow_id, self.run_id)
        return flow

    def _request(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None or flow.has_request:
            self.counts["duplicate_record"] += 1
            return
        flow.has_request = True
        last_event_id = session = version = ctype = client_value = None
        mcp_headers: list[dict[str, str]] | None = None
        client_header = self.client_header
        for name, value in record["headers"]:
            lname = name.lower()
            if lname == "last-event-id":
                last_event_id = value
            elif lname == "mcp-session-id":
                session = value
            elif lname == "mcp-protocol-version":
                version = value
            elif lname == "content-type":
                ctype = media_type(value)
            elif lname.startswith(MCP_HEADER_PREFIXES):
                if mcp_headers is None:
                    mcp_headers = []
                mcp_headers.append({"name": name, "value": value})
            if client_header is not None and lname == client_header:
                client_value = value
        flow.client_value = client_value
        flow.mcp_headers = _json_list(mcp_headers) if mcp_headers else None
        path, _, query = record["path"].partition("?")
        flow.path = path
        flow.query = query or None
        flow.client_ip = client_ip(record.get("client"))
        flow.req = (
            record["ts_ns"],
            record["seq"],
            record["method"],
            record.get("scheme"),
            record.get("authority"),
            record.get("upstream"),
            last_event_id,
            session,
            version,
            ctype,
        )
        body = record.get("body")
        if body is not None:
            raw, flow.request_body_hash, flow.request_truncated = self._body(body)
            if raw:
                self._body_messages(flow, raw, record, "request_body", "c2s", request=True)

    def _response(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None or flow.has_response:
            self.counts["duplicate_record"] += 1
            return
        flow.has_response = True
        flow.resp_ts = record["ts_ns"]
        flow.resp_seq = record["seq"]
        flow.status = record["status"]
        ctype = session = override = None
        replica_header = self.replica_header
        for name, value in record["headers"]:
            lname = name.lower()
            if lname == "content-type":
                ctype = media_type(value)
            elif lname == "mcp-session-id":
                session = value
            if replica_header is not None and lname == replica_header and override is None:
                override = value
        flow.content_type = ctype
        flow.response_session_id = session
        if override is not None:
            flow.replica, flow.replica_source = override, "header"
        else:
            flow.replica = record.get("replica")
            flow.replica_source = record.get("replica_source")
        streamed = bool(record.get("streamed"))
        flow.streamed = streamed
        flow.body_missing = bool(record.get("body_missing")) or None
        body = record.get("body")
        if body is not None:
            raw, flow.response_body_hash, flow.response_truncated = self._body(body)
            flow.undecoded = bool(body.get("decode_error"))
            if raw and ctype is not None and "json" in ctype:
                self._body_messages(flow, raw, record, "response_body", "s2c", request=False)
            elif raw and ctype == "text/event-stream":
                # A buffered (not streamed) event stream: decode it as one chunk.
                self._feed(flow, raw, record["ts_ns"], record["seq"], -1)
                self._close_decoder(flow)

    def add_chunk(
        self,
        flow_id: str,
        n: int,
        data: Mapping[str, Any],
        ts: int,
        seq: int,
        capped: object,
    ) -> None:
        """`add` of a well-formed chunk record, given its fields (a reader's fast lane)."""
        self.records += 1
        self._take_chunk(flow_id, n, data, ts, seq, capped)

    def _chunk(self, record: dict[str, Any]) -> None:
        self._take_chunk(
            record["flow"],
            record["n"],
            record["data"],
            record["ts_ns"],
            record["seq"],
            record.get("decompress_capped"),
        )

    def _take_chunk(
        self, flow_id: str, n: int, data: Mapping[str, Any], ts: int, seq: int, capped: object
    ) -> None:
        flow = self._flow(flow_id)
        if flow is None:
            self.counts["duplicate_record" if n < self._ended[flow_id] else "late_record"] += 1
            return
        if n < flow.next_n:
            self.counts["duplicate_record"] += 1
            return
        if n > flow.next_n:
            self.counts["chunk_gap"] += n - flow.next_n
        flow.next_n = n + 1
        flow.chunks += 1
        if capped:
            flow.capped = True
        withheld = data.get("truncated_bytes")
        if withheld:
            # Bytes of an oversized event that the proxy did not record (it redacts events
            # whole, up to a bound): part of the response is not in the capture.
            flow.response_truncated = (flow.response_truncated or 0) + withheld
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        text = data.get("text")
        if text is not None:
            events = decoder.feed_text(text)
        else:
            events = decoder.feed(base64.b64decode(data.get("b64") or ""))
        for event in events:
            self._event(flow, event, ts, seq, n)

    def _stream_end(self, record: dict[str, Any]) -> None:
        flow = self._flow(record["flow"])
        if flow is None:
            self.counts["duplicate_record"] += 1
            return
        flow.end_ts = record["ts_ns"]
        flow.end_seq = record["seq"]
        flow.end_how = record["how"]
        flow.end_error = error = record.get("error")
        if isinstance(error, str) and DECODE_FAILURE.search(error):
            flow.undecoded = True
        if flow.decoder is not None:
            self._close_decoder(flow)
        # Every flow of a capture ends with its stream_end: write its row now, so that memory
        # holds open flows only; keep what tells later records apart (duplicate or late).
        self._flow_row(flow)
        del self._flows[flow.flow_id]
        ended = self._ended
        ended[flow.flow_id] = flow.next_n
        if len(ended) > _ENDED_MAX:
            del ended[next(iter(ended))]  # the earliest ended

    def _server_unreachable(self, record: dict[str, Any]) -> None:
        flow_id = record.get("flow")
        if isinstance(flow_id, str):
            flow = self._flow(flow_id)
            if flow is None:
                self.counts["late_record"] += 1
            else:
                flow.unreachable = record.get("error") or "unreachable"
        else:
            self.counts["server_unreachable"] += 1

    # -- bodies -----------------------------------------------------------------------------

    def _body(self, body: Mapping[str, Any]) -> tuple[bytes, str, int | None]:
        text = body.get("text")
        if text is not None:
            try:
                raw = text.encode("utf-8")
                stored, is_b64 = text, False
            except UnicodeEncodeError:
                # A lone surrogate (a leniently read line): the bytes it stands for are kept
                # as they are, as base64, since no UTF-8 text column can hold them.
                raw = text.encode("utf-8", "surrogatepass")
                stored, is_b64 = base64.b64encode(raw).decode("ascii"), True
        else:
            stored = body.get("b64") or ""
            raw = base64.b64decode(stored)
            is_b64 = True
        data_hash = bytes_hash(raw)
        self._store_payload(data_hash, stored, is_b64)
        return raw, data_hash, body.get("truncated_bytes")

    def _store_payload(self, data_hash: str, text: str, is_b64: bool) -> None:
        if data_hash not in self._seen_payloads:
            self._seen_payloads.add(data_hash)
            p = self._payload
            p[0](data_hash)
            p[1](text)
            p[2](is_b64)

    def _body_messages(
        self,
        flow: FlowState,
        raw: bytes,
        record: Mapping[str, Any],
        source: str,
        direction: str,
        *,
        request: bool,
    ) -> None:
        described = describe_payload(raw)
        data_hash = described.data_hash
        if described.result_version is not None and flow.result_version is None:
            flow.result_version = described.result_version
        ts, seq = record["ts_ns"], record["seq"]
        for row in described.rows:
            self._message(flow.flow_id, ts, seq, source, None, None, direction, data_hash, row)
        self._tools(flow.flow_id, ts, seq, described.tools)
        if request:
            first = next((r for r in described.rows if r[3] is not None), None)
            first_request = next((r for r in described.rows if r[1] == "request"), None)
            init = next(
                (r for r in described.rows if r[1] == "request" and r[3] == "initialize"), None
            )
            meta_row = init or first_request
            flow.rpc = (
                described.top_kind,
                first_request[2] if first_request else None,
                first[3] if first else None,
                meta_row[13] if meta_row else None,
                meta_row[12] if meta_row else None,
            )
            flow.initialize = init is not None

    # -- SSE --------------------------------------------------------------------------------

    def _feed(self, flow: FlowState, raw: bytes, ts: int, seq: int, n: int) -> None:
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        for event in decoder.feed(raw):
            self._event(flow, event, ts, seq, n)

    def _close_decoder(self, flow: FlowState) -> None:
        decoder = flow.decoder
        if decoder is None:
            return
        decoder.flush()
        tail = decoder.tail
        flow.tail_bytes = len(tail) if tail else None
        flow.decoder = None

    def _event(self, flow: FlowState, event: SseEvent, ts: int, seq: int, n: int) -> None:
        ordinal = flow.events
        flow.events = ordinal + 1
        flow.last_cursor = event.last_event_id
        if event.id and flow.first_cursor is None:
            flow.first_cursor = event.id
        retry = event.retry
        warnings = event.warnings
        if retry is not None:
            if retry >= S.INT64_END:
                # Valid per WHATWG (ASCII digits) but past any Int64 column: no real delay.
                retry = None
                warnings = (*warnings, "retry-too-large")
            else:
                flow.last_retry = retry
        flow_id = flow.flow_id
        if event.id_only:
            data_hash = payload_hash = None
            data_bytes = 0
        else:
            flow.payload_events += 1
            data = event.data
            kind = event.event
            if kind == "message":
                described = self._memo.get(data)
                if described is None:
                    described = describe_payload(data.encode("utf-8", "surrogatepass"), data)
                    if len(self._memo) >= MEMO_MAX:
                        self._memo.clear()
                    self._memo[data] = described
                data_hash = described.data_hash
                data_bytes = described.data_bytes
                payload_hash = described.payload_hash
                msg = self._msg
                event_id = event.id
                if described.result_version is not None and flow.result_version is None:
                    flow.result_version = described.result_version
                for row in described.rows:
                    msg((flow_id, ts, seq, "sse", ordinal, row[0], event_id, "s2c", *row[1:6],
                         data_hash, *row[6:]))  # fmt: skip
                if described.tools:
                    self._tools(flow_id, ts, seq, described.tools)
            else:
                # Not a JSON-RPC carrier (the legacy `endpoint` event, custom types): the
                # payload is (type, data) compared as bytes.
                if kind == "endpoint" and flow.endpoint_url is None:
                    flow.endpoint_url = data
                raw = data.encode("utf-8", "surrogatepass")
                data_hash = payload_hash = bytes_hash(raw)
                data_bytes = len(raw)
            if data_hash not in self._seen_payloads:
                self._store_payload(data_hash, data, False)
        self._ev(
            (
                flow_id,
                ts,
                seq,
                ordinal,
                n,
                event.id,
                event.last_event_id,
                event.event,
                data_hash,
                data_bytes,
                payload_hash,
                retry,
                event.id_only,
                event.comments,
                _json_list(warnings) if warnings else None,
                flow.payload_events,
            )
        )

    # -- rows -------------------------------------------------------------------------------

    def _message(
        self,
        flow_id: str,
        ts: int,
        seq: int,
        source: str,
        ordinal: int | None,
        event_id: str | None,
        direction: str,
        data_hash: str,
        row: MsgRow,
    ) -> None:
        self._msg((flow_id, ts, seq, source, ordinal, row[0], event_id, direction, *row[1:6],
                   data_hash, *row[6:]))  # fmt: skip

    def _tools(self, flow_id: str, ts: int, seq: int, tools: Iterable[ToolRow]) -> None:
        t = self._tool
        for tool in tools:
            t[0](flow_id)
            t[1](ts)
            t[2](seq)
            for index, value in enumerate(tool):
                t[index + 3](value)

    def _flow_row(self, flow: FlowState) -> None:
        if flow.capped or flow.undecoded:
            # The proxy could not decode all of the response (an unknown or broken content
            # coding, or past its decoding bound): what it carried is not all in the capture.
            self.counts["undecoded_body"] += 1
            flow.body_missing = True
        cols = self._flow_cols.cols
        for name, value in zip(S.RAW_FLOWS, flow.row(), strict=True):
            cols[name].append(value)
