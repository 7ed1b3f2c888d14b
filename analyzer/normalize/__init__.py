"""Normalize: capture records → flows, SSE events, JSON-RPC messages, listed tools, payloads.

Sans-IO (DESIGN.md §3): `Normalizer.add(record)` takes schema-1 record dicts in capture order,
whatever input they came from (captures, mitmproxy dumps and HAR files are all turned into the
same records), and `drain()` hands back column batches as DataFrames of the `analyzer.schema`
`RAW_*` tables. Per flow, the chunk data is fed to one `SseDecoder`, so every event is decoded
exactly as a browser would decode the concatenated stream; an event's `ts` and `seq` are those
of the chunk record that completed it.

The package: `describe` (payloads → hashes, message rows, listed tools), `columns` (column
lists → DataFrames, `NormalizedFrames`), `flow` (per-flow state; what the bulk lane hands over),
`handlers` (each record kind taken into the flow state and the columns) and `normalizer`
(`Normalizer`, `normalize_records`).

This is the per-record hot path of a first analysis (≥200k events/s is the target on two
cores), hence the plain column lists, the bound `append`s and the memo of recently seen `data`.
"""

from analyzer.normalize.columns import NormalizedFrames
from analyzer.normalize.describe import fast_canonical_hash, json_number
from analyzer.normalize.flow import BulkDescription, SseRun
from analyzer.normalize.handlers import DECODE_FAILURE
from analyzer.normalize.normalizer import DEFAULT_BATCH_EVENTS, Normalizer, normalize_records

__all__ = [
    "DECODE_FAILURE",
    "DEFAULT_BATCH_EVENTS",
    "BulkDescription",
    "NormalizedFrames",
    "Normalizer",
    "SseRun",
    "fast_canonical_hash",
    "json_number",
    "normalize_records",
]
