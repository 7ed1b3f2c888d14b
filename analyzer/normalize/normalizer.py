"""The normalizer: schema-1 records in capture order in, batches of the normalized tables out."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from analyzer import schema as S
from analyzer.normalize.columns import Columns, NormalizedFrames
from analyzer.normalize.describe import (
    MEMO_MAX,
    Described,
    PlainRow,
    describe_general,
    plain_row,
)
from analyzer.normalize.flow import (
    BULK_MESSAGE_SCHEMA,
    CARRIED,
    BulkDescription,
    FlowState,
    SseRun,
    decoder_idle,
    general_frames,
    plain_frame,
)
from analyzer.normalize.handlers import RecordHandlers
from analyzer.sse import SseDecoder

DEFAULT_BATCH_EVENTS = 50_000
"""Events per batch: column lists of Python objects cost ~1.5 KB an event until drained."""
_SEEN_PAYLOADS_MAX = 200_000


class Normalizer(RecordHandlers):
    """Turns schema-1 record dicts into the normalized tables, batch by batch.

    Records must come in capture order per flow (request, response, chunks by `n`, stream_end);
    flows may interleave. Damage it meets is counted in `counts` (duplicate_record, chunk_gap,
    late_record) and the record skipped. A flow's row is written at its stream_end, or by
    `finish()` for flows the input left open. Records that are not capture schema 1 but that
    dump and HAR readers synthesize: `response.body_missing` (a body the dump did not keep).
    """

    def __init__(
        self,
        *,
        replica_header: str | None = None,
        client_header: str | None = None,
        batch_events: int = DEFAULT_BATCH_EVENTS,
    ) -> None:
        super().__init__(replica_header=replica_header, client_header=client_header)
        self.batch_events = batch_events
        self._bulk_memo: dict[str, PlainRow | Described] = {}
        self._bulk: dict[str, list[pl.DataFrame]] = {
            "events": [],
            "messages": [],
            "tools": [],
            "payloads": [],
        }

    # -- input ------------------------------------------------------------------------------

    def add(self, record: dict[str, Any]) -> None:
        """Take one record (already checked to be well-formed schema 1)."""
        handler = self._handlers.get(record["kind"])
        self.records += 1
        if handler is not None:
            handler(record)

    def add_all(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.add(record)

    def pending_events(self) -> int:
        return len(self._event_cols) + sum(frame.height for frame in self._bulk["events"])

    # -- the bulk lane (analyzer.ingest.bulk) -------------------------------------------------

    def describe_data(self, datas: Sequence[str]) -> BulkDescription:
        """What `_event` derives from the data of "message" events, for many at once; an
        empty buffer (an id-only event) has no payload.

        The plain messages (`plain_row`: nearly all) give one tuple each, turned into columns at
        once; the others are described the general way, row by row.
        """
        memo = self._bulk_memo
        plain_at: list[int] = []
        plain_rows: list[PlainRow] = []
        other_at: list[int] = []
        others: list[Described] = []
        for index, data in enumerate(datas):
            if not data:
                continue
            found = memo.get(data)
            if found is None:
                raw = data.encode("utf-8", "surrogatepass")
                found = plain_row(raw) or describe_general(raw, data)
                if len(memo) >= MEMO_MAX:
                    memo.clear()
                memo[data] = found
            if isinstance(found, Described):
                other_at.append(index)
                others.append(found)
            else:
                plain_at.append(index)
                plain_rows.append(found)
        plain = plain_frame(plain_at, plain_rows)
        general = general_frames(other_at, others)
        carried = pl.concat(
            [
                plain.select(CARRIED.names()),
                general.carried,
            ]
        ).sort("event")
        messages = pl.concat([plain.select(BULK_MESSAGE_SCHEMA.names()), general.messages]).sort(
            "event", maintain_order=True
        )
        return BulkDescription(carried, messages, general.tools)

    def take_run(self, flow_id: str, run: SseRun) -> tuple[int, int, str] | None:
        """Take a run of chunk records decoded in bulk: the flow's (events, payload events,
        last event ID) before it, or None when the flow is not where the run can start (a
        block open in its decoder, a chunk missing or repeated, the flow ended): then the
        run's records go through `add_chunk`, as any other."""
        flow = self._flows.get(flow_id)
        if flow is None and flow_id in self._ended:
            return None
        if flow is not None and (flow.next_n != run.first_n or not decoder_idle(flow.decoder)):
            return None
        if flow is None:
            if run.first_n != 0:
                return None
            flow = self._flows[flow_id] = FlowState(flow_id, self.run_id)
        decoder = flow.decoder
        if decoder is None:
            decoder = flow.decoder = SseDecoder()
        before = (flow.events, flow.payload_events, decoder.last_event_id)
        last = before[2] if run.last_id is None else run.last_id
        decoder.skip(last)
        self.records += run.chunks
        flow.next_n = run.first_n + run.chunks
        flow.chunks += run.chunks
        flow.events += run.events
        flow.payload_events += run.payload_events
        if run.events:
            flow.last_cursor = last
        if flow.first_cursor is None and run.first_cursor:
            flow.first_cursor = run.first_cursor
        if flow.result_version is None:
            flow.result_version = run.result_version
        return before

    def add_frames(self, events: pl.DataFrame, messages: pl.DataFrame, tools: pl.DataFrame) -> None:
        """Rows the bulk lane made, of RAW_EVENTS, RAW_MESSAGES and RAW_TOOLS."""
        self._bulk["events"].append(events)
        self._bulk["messages"].append(messages)
        self._bulk["tools"].append(tools)

    def add_payloads(self, payloads: pl.DataFrame) -> None:
        """Payload texts (`data_hash`, `text`: SSE data) of bulk-lane events, stored once each."""
        distinct = payloads.unique("data_hash", keep="first", maintain_order=True)
        seen = self._seen_payloads
        hashes = distinct["data_hash"].to_list()
        fresh = distinct.filter(pl.Series([h not in seen for h in hashes], dtype=pl.Boolean))
        seen.update(hashes)
        self._bulk["payloads"].append(fresh.with_columns(pl.lit(False).alias("base64")))

    def _with_bulk(self, table: str, frame: pl.DataFrame) -> pl.DataFrame:
        parts = self._bulk[table]
        if not parts:
            return frame
        merged = pl.concat([frame, *parts])
        parts.clear()
        return merged

    def drain(self) -> NormalizedFrames:
        """The rows so far: ended flows, events, messages, tools and payloads."""
        if len(self._seen_payloads) > _SEEN_PAYLOADS_MAX:
            self._seen_payloads.clear()
        return NormalizedFrames(
            flows=self._flow_cols.take(),
            events=self._with_bulk("events", self._event_cols.take()),
            messages=self._with_bulk("messages", self._message_cols.take()),
            tools=self._with_bulk("tools", self._tool_cols.take()),
            payloads=self._with_bulk("payloads", self._payload_cols.take()),
        )

    def finish(self) -> NormalizedFrames:
        """End every flow (open streams included) and return what remains, flows included."""
        for flow in self._flows.values():
            if flow.decoder is not None:
                self._close_decoder(flow)
            self._flow_row(flow)
        self._flows.clear()
        return self.drain()

    def snapshot(self) -> pl.DataFrame:
        """Rows of the flows still open, as `finish()` would write them now; nothing ends.

        For a reader that follows a growing capture (`analyzer.ingest.tail`): open streams show
        their events so far while the normalizer goes on taking their records.
        """
        held = self._flow_cols
        self._flow_cols = Columns(S.RAW_FLOWS)
        try:
            for flow in self._flows.values():
                view = copy.copy(flow)
                if view.decoder is not None:
                    # What `_close_decoder` records; `flush()` leaves `tail` as it is.
                    tail = view.decoder.tail
                    view.tail_bytes = len(tail) if tail else None
                    view.decoder = None
                self._flow_row(view)
            return self._flow_cols.take()
        finally:
            self._flow_cols = held

    # -- records ----------------------------------------------------------------------------


def normalize_records(
    records: Iterable[dict[str, Any]],
    *,
    replica_header: str | None = None,
    client_header: str | None = None,
) -> NormalizedFrames:
    """Normalize records in memory (tests, dumps, HAR): all tables, payloads deduplicated."""
    normalizer = Normalizer(replica_header=replica_header, client_header=client_header)
    normalizer.add_all(records)
    return NormalizedFrames.concat([normalizer.finish()])
