"""The vectorized lane of the capture reader: plain chunk records, parsed and split in bulk.

Nearly every line of a capture is a `chunk` record whose SSE text is whole events made of
`id:`, `data:` and `event: message` lines. Polars reads those lines (`read_ndjson` with an
explicit schema), checks them and cuts their events out in bulk; what their data carries is then
described once per event (`Normalizer.describe_data`). Every other line, and every chunk whose
text is not of that plain shape (CR alone, comments, `retry`, multi-line data, an event cut
across chunks, base64), goes the per-record way (`Normalizer.add`), which stays the reference:
the two give the same frames (tests/ingest/test_bulk.py checks it under random chunkings).

A line is taken here only when the per-record lane would have parsed it to the same record with
the same fields: one each of `"kind":"chunk"`, `"seq":`, `"ts_ns":`, `"flow":"`, `"n":` and
`"data":{"text":"` (the reader's schema coerces a number to text, and takes the first of two
equal keys where orjson takes the last), no `b64` nor `truncated_bytes` in `data`, no
`decompress_capped` but null, no escaped UTF-16 surrogate, integers in their columns' ranges
(the schema makes anything else null); a line in the capture writer's own layout
(`WRITER_SHAPE`) is all of that by its shape, found in one search. A batch of lines the JSON
reader refuses (a corrupt or non-UTF-8 line) is halved until the bad lines are alone: they go
the per-record way, counted as today, and the rest stays here.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Final

import polars as pl

from analyzer import schema as S

__all__ = [
    "EMPTY_CHUNKS",
    "EMPTY_EVENTS",
    "PLAIN_CHUNK",
    "flow_ids",
    "owner",
    "plain_events",
    "read_chunks",
    "run_frames",
    "runs",
    "sieve",
]

# An escape for a UTF-16 surrogate: a pair is valid JSON, but a lone one is no Unicode text.
_SURROGATE: Final = r"\\u[dD][89a-fA-F]"

# The plain SSE shape (WHATWG "event stream interpretation"): blocks of `id`, `data` and
# `event: message` lines ("If value starts with a U+0020 SPACE character, remove it"), each
# ended by a blank line; an `id` holding NUL is ignored by the spec, so it is not plain.
PLAIN_CHUNK: Final = r"^(?:(?:(?:id: ?[^\n\x00]*|data: ?[^\n]*|event: ?(?:message)?)\n)+\n)+$"
"""Chunk text (LF line ends) that is whole events the bulk lane splits."""

_INT32_MAX: Final = (1 << 31) - 1
_ALONE: Final = 1  # a refused batch is halved down to single lines
_CHUNK_SCHEMA: Final = pl.Schema(
    {  # type: ignore[arg-type]  # a Struct beside the classes (polars' stubs take one kind)
        "kind": pl.String,
        "seq": pl.Int64,
        "ts_ns": pl.Int64,
        "flow": pl.String,
        "n": pl.Int64,
        "data": pl.Struct({"text": pl.String}),
        "decompress_capped": pl.Boolean,
    }
)
_ONCE: Final = ('"kind":', '"kind":"chunk"', '"seq":', '"ts_ns":', '"flow":', '"flow":"',
                '"n":', '"data":', '"data":{"text":"', '"text":')  # fmt: skip
_NEVER: Final = ('"b64"', '"truncated_bytes"')
_CAPPED: Final = '"decompress_capped":'


# A record's flow id: inside a JSON string every '"' is escaped, so the first unescaped
# `"flow":` with a string value is the record's own top-level key (no nested object of schema 1
# has a "flow" member).
_FLOW_VALUE: Final = r'"flow": *"([^"]*)"'

# A chunk record as the capture writer lays it out (`seq` first; the synthetic captures put it
# last): every key once, no `b64`, `truncated_bytes` nor `decompress_capped`, and the text's
# escapes complete with no UTF-16 surrogate. A line of this shape passes every check of
# `read_chunks` on the raw text, in one search instead of one a key.
_ESCAPE: Final = r"\\(?:[^u]|u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
_CHUNK_BODY: Final = (
    r'"kind":"chunk","ts_ns":\d+,"mono_ns":-?\d+,"flow":"[^"\\]*","n":\d+,'
    r'"content_encoding":(?:null|"[^"\\]*"),"data":\{"text":"(?:[^"\\]|' + _ESCAPE + r')*"\}'
)
WRITER_SHAPE: Final = r'^\{(?:"seq":\d+,' + _CHUNK_BODY + "|" + _CHUNK_BODY + r',"seq":\d+)\}$'
"""A chunk line in the writer's layout (`read_chunks` checks any other key by key)."""


def _text(lines: Sequence[bytes]) -> pl.Series:
    """The lines as text: a line that is no UTF-8 (rare: a damaged capture) with U+FFFD for
    its bad bytes, so its flow id, when whole, still names its owner."""
    try:
        return pl.Series("text", lines, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.PolarsError:
        return pl.Series("text", [line.decode("utf-8", "replace") for line in lines])


def _owner(flow: pl.Expr, parts: int) -> pl.Expr:
    """The owner of a line whose flow id (`_FLOW_VALUE`) is `flow`."""
    return pl.when(flow.is_null()).then(0).otherwise(flow.hash() % parts).cast(pl.Int64)


def owner(line: bytes, parts: int) -> int:
    """The worker (of `parts`) owning a line: by a hash of its flow id, 0 when it has none;
    every line of a flow has one owner, so one decoder reads its stream."""
    return int(pl.select(_owner(pl.lit(_text([line])).str.extract(_FLOW_VALUE), parts)).item())


def flow_ids(lines: Sequence[bytes]) -> pl.Series:
    """Each line's flow id as `owner` reads it (null for a line without one)."""
    return _text(lines).str.extract(_FLOW_VALUE).rename("flow")


def sieve(
    lines: Sequence[bytes],
    parts: int,
    part: int,
    skip_first: bool,
    skip: frozenset[str] = frozenset(),
) -> tuple[list[int], list[int]]:
    """The indexes of the lines worker `part` owns: those the bulk lane may take (a cheap first
    look, `read_chunks` checks the rest; never the first line when `skip_first`: it may hold a
    byte order mark), and the others. The lines of the flows in `skip` are no one's (another
    reader takes them: `analyzer.ingest.jsonl.read_flow_lines`)."""
    raw = pl.col("raw")
    index = pl.int_range(pl.len(), dtype=pl.Int64)
    chunk = raw.bin.starts_with(b'{"') & raw.bin.contains(b'"kind":"chunk"')
    if skip_first:
        chunk = chunk & (index > 0)
    columns = [pl.Series("raw", lines, dtype=pl.Binary)]
    mine = pl.lit(True)
    if parts > 1 or skip:
        # The flow id as a column of its own: searched once a line, not once an expression.
        columns.append(flow_ids(lines))
    if parts > 1:
        mine = _owner(pl.col("flow"), parts) == part
    if skip:
        mine = mine & ~pl.col("flow").is_in(list(skip)).fill_null(False)
    marked = pl.DataFrame(columns).select(
        index.alias("index"), chunk.alias("chunk"), mine.alias("mine")
    )
    owned = marked.filter("mine")
    return (
        owned.filter("chunk")["index"].to_list(),
        owned.filter(~pl.col("chunk"))["index"].to_list(),
    )


def read_chunks(lines: Sequence[bytes]) -> tuple[pl.DataFrame, list[int]]:
    """The chunk records among `lines` that the bulk lane takes, and the indexes of the others.

    Columns: `line` (index in `lines`), `flow_id`, `n`, `ts`, `seq`, `text`.
    """
    pieces: list[pl.DataFrame] = []
    refused: list[int] = []
    _read(lines, 0, len(lines), pieces, refused)
    frame = pl.concat(pieces) if pieces else pl.DataFrame(schema=_READ_SCHEMA)
    if frame.height == 0:
        return EMPTY_CHUNKS, list(range(len(lines)))
    # The lines as text without a Python str each (a line that is no UTF-8 is null: not taken).
    text = pl.Series("raw", [lines[i] for i in frame["line"].to_list()], dtype=pl.Binary).cast(
        pl.String, strict=False
    )
    line = pl.col("raw")
    framed = frame.with_columns(text).with_columns(
        line.str.contains(WRITER_SHAPE).fill_null(False).alias("usual")
    )
    checked = framed.filter(~pl.col("usual")).filter(
        pl.all_horizontal([line.str.count_matches(key, literal=True) == 1 for key in _ONCE])
        & ~pl.any_horizontal([line.str.contains(key, literal=True) for key in _NEVER])
        & (
            line.str.count_matches(_CAPPED, literal=True)
            == line.str.count_matches(f"{_CAPPED}null", literal=True)
        )
        & ~line.str.contains(_SURROGATE)
    )
    taken = (
        pl.concat([framed.filter("usual"), checked])
        .sort("line")
        .filter(
            pl.all_horizontal(pl.col("flow_id", "n", "ts", "seq", "text").is_not_null())
            & (pl.col("kind") == "chunk")
            & pl.col("n").is_between(0, _INT32_MAX)
            & (pl.col("seq") >= 0)
        )
        .drop("raw", "kind", "usual")
    )
    left = set(range(len(lines))).difference(taken["line"].to_list())
    return taken, sorted(left)


_READ_SCHEMA: Final = pl.Schema(
    {
        "line": pl.Int64,
        "kind": pl.String,
        "flow_id": pl.String,
        "n": pl.Int64,
        "ts": pl.Int64,
        "seq": pl.Int64,
        "text": pl.String,
    }
)


def _read(
    lines: Sequence[bytes], lo: int, hi: int, pieces: list[pl.DataFrame], refused: list[int]
) -> None:
    if lo >= hi:
        return
    try:
        frame = pl.read_ndjson(
            io.BytesIO(b"\n".join(lines[lo:hi])), schema=_CHUNK_SCHEMA, ignore_errors=True
        )
    except pl.exceptions.PolarsError:
        frame = None
    if frame is not None and frame.height == hi - lo:
        pieces.append(
            frame.select(
                pl.int_range(lo, hi, dtype=pl.Int64).alias("line"),
                "kind",
                pl.col("flow").alias("flow_id"),
                "n",
                pl.col("ts_ns").alias("ts"),
                "seq",
                pl.col("data").struct.field("text"),
            )
        )
        return
    if hi - lo <= _ALONE:
        refused.extend(range(lo, hi))
        return
    mid = (lo + hi) // 2
    _read(lines, lo, mid, pieces, refused)
    _read(lines, mid, hi, pieces, refused)


def plain_events(chunks: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The events of the chunks whose text is plain, and a mask of those chunks.

    `chunks` has `line, flow_id, n, ts, seq, text`. Events come in chunk order, each with its
    chunk's `line, flow_id, n, ts, seq`, and `event_id` (null when the block set none), `data`
    (the data buffer, "" when none) and `id_only`. A text whose line ends are all CRLF is the
    same lines as with LF (WHATWG: CRLF, LF and CR each end a line), so it is taken with LF.
    """
    text = pl.col("text")
    lf = (
        pl.when(text.str.contains("\r", literal=True))
        .then(
            pl.when(
                text.str.count_matches("\r", literal=True)
                == text.str.count_matches("\r\n", literal=True)
            ).then(text.str.replace_all("\r\n", "\n", literal=True))
        )
        .otherwise(text)
    )
    marked = chunks.with_columns(lf.alias("lf")).with_columns(
        pl.col("lf").str.contains(PLAIN_CHUNK).fill_null(False).alias("plain")
    )
    blocks = (
        marked.filter("plain")
        .select(
            "line",
            "flow_id",
            "n",
            "ts",
            "seq",
            pl.col("lf").str.strip_suffix("\n\n").str.split("\n\n").alias("block"),
        )
        .explode("block")
        .with_row_index("block_index")
    )
    # The usual block is `id` then `data`, or one of them alone, with or without an
    # `event: message` line (the default type: no field to keep): its fields are cut out by
    # literal tests (cheap); any other plain block is read by the line patterns below. Lines
    # are cut at LF, so "\nevent: message\n" is a whole line.
    kept = pl.col("kept")
    first_end = kept.str.find("\n", literal=True)
    head = kept.str.slice(0, first_end)
    rest = kept.str.slice(first_end + 1)
    one_line = first_end.is_null()
    usual = (
        blocks.with_columns(
            pl.col("block")
            .str.replace_all("\nevent: message\n", "\n", literal=True)
            .str.strip_prefix("event: message\n")
            .str.strip_suffix("\nevent: message")
            .alias("kept")
        )
        .with_columns(
            one_line.alias("one_line"),
            kept.str.starts_with("id:").alias("head_id"),
            pl.when(one_line)
            .then(kept.str.starts_with("data:"))
            .otherwise(rest.str.starts_with("data:") & ~rest.str.contains("\n", literal=True))
            .alias("tail_data"),
        )
        .filter(
            (pl.col("one_line") & (pl.col("head_id") | pl.col("tail_data")))
            | (~pl.col("one_line") & pl.col("head_id") & pl.col("tail_data"))
        )
    )
    usual = usual.select(
        *blocks.columns,
        pl.when(pl.col("head_id"))
        .then(pl.when(pl.col("one_line")).then(kept).otherwise(head))
        .str.strip_prefix("id:")
        .str.strip_prefix(" ")
        .alias("event_id"),
        pl.when(pl.col("tail_data"))
        .then(pl.when(pl.col("one_line")).then(kept).otherwise(rest))
        .str.strip_prefix("data:")
        .str.strip_prefix(" ")
        .fill_null("")
        .alias("data"),
    )
    block = pl.col("block")
    others = blocks.join(usual.select("block_index"), on="block_index", how="anti").with_columns(
        block.str.count_matches(r"(?m)^id:").alias("ids"),
        block.str.count_matches(r"(?m)^data:").alias("datas"),
        block.str.extract(r"(?m)^id: ?(.*)$").alias("event_id"),
        block.str.extract(r"(?m)^data: ?(.*)$").fill_null("").alias("data"),
    )
    # Two `id` or two `data` lines in one block (the last id wins, data lines join with LF):
    # rare, and left whole to the reference decoder.
    repeated = others.filter((pl.col("ids") > 1) | (pl.col("datas") > 1))["line"].unique()
    events = pl.concat([usual, others.drop("ids", "datas")]).sort("block_index")
    plain = marked["plain"] & ~marked["line"].is_in(repeated.implode())
    events = events.filter(~pl.col("line").is_in(repeated.implode())).select(
        "line",
        "flow_id",
        "n",
        "ts",
        "seq",
        "event_id",
        "data",
        (pl.col("data") == "").alias("id_only"),
    )
    return events, plain


def runs(chunks: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Per flow, its plain chunks of a block as one run: `flow_id, first_line, last_line,
    first_n, chunks, contiguous, events, payload_events, first_cursor, last_id,
    result_version` (`events` needs a `result_version` column)."""
    per_chunk = chunks.group_by("flow_id", maintain_order=True).agg(
        pl.col("line").first().alias("first_line"),
        pl.col("line").last().alias("last_line"),
        pl.col("n").first().alias("first_n"),
        pl.len().alias("chunks"),
        (pl.col("n") - pl.col("n").first() == pl.int_range(pl.len())).all().alias("contiguous"),
    )
    event_id = pl.col("event_id")
    per_event = events.group_by("flow_id").agg(
        pl.len().alias("events"),
        (~pl.col("id_only")).sum().alias("payload_events"),
        event_id.filter(event_id != "").first().alias("first_cursor"),
        event_id.drop_nulls().last().alias("last_id"),
        pl.col("result_version").drop_nulls().first(),
    )
    return per_chunk.join(per_event, on="flow_id", how="left", maintain_order="left")


def run_frames(
    events: pl.DataFrame,
    messages: pl.DataFrame,
    tools: pl.DataFrame,
    taken: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """RAW_EVENTS, RAW_MESSAGES and RAW_TOOLS rows of the runs taken.

    `events` are the block's plain events (in line order) with `data_hash, data_bytes,
    payload_hash`; `messages` and `tools` come from `Normalizer.describe_data` (keyed by
    `event`, the row of `events`); `taken` has `flow_id, events_before, payload_before,
    last_before` for each flow whose run was taken.
    """
    placed = (
        events.with_row_index("event")
        .join(taken, on="flow_id", how="inner", maintain_order="left")
        .with_columns(
            (pl.col("events_before") + pl.int_range(pl.len()).over("flow_id"))
            .cast(pl.Int32)
            .alias("ordinal"),
            (pl.col("payload_before") + (~pl.col("id_only")).cum_sum().over("flow_id"))
            .cast(pl.Int32)
            .alias("payload_seen"),
            pl.col("event_id")
            .forward_fill()
            .over("flow_id")
            .fill_null(pl.col("last_before"))
            .alias("last_event_id"),
            pl.col("ts").cast(S.TS),
        )
    )
    frame = placed.select(
        "flow_id",
        "ts",
        "seq",
        "ordinal",
        pl.col("n").cast(pl.Int32).alias("chunk_n"),
        "event_id",
        "last_event_id",
        pl.lit("message").alias("event"),
        "data_hash",
        pl.col("data_bytes").cast(pl.Int32),
        "payload_hash",
        pl.lit(None, pl.Int64).alias("retry"),
        "id_only",
        pl.lit(0, pl.Int32).alias("comments"),
        pl.lit([], pl.List(pl.String)).alias("warnings"),
        "payload_seen",
    )
    carriers = placed.select(
        pl.col("event").cast(pl.Int64), "flow_id", "ts", "seq", "ordinal", "event_id"
    )
    message_frame = (
        messages.join(carriers, on="event", how="inner", maintain_order="left")
        .with_columns(
            pl.lit("sse").cast(S.SOURCE).alias("source"),
            pl.lit("s2c").cast(S.DIRECTION).alias("direction"),
        )
        .select(S.RAW_MESSAGES.names())
    )
    tool_frame = tools.join(carriers, on="event", how="inner", maintain_order="left").select(
        S.RAW_TOOLS.names()
    )
    return frame, message_frame, tool_frame


_CHUNK_COLUMNS: Final = {
    "line": pl.Int64,
    "flow_id": pl.String,
    "n": pl.Int64,
    "ts": pl.Int64,
    "seq": pl.Int64,
}
EMPTY_CHUNKS: Final = pl.DataFrame(schema={**_CHUNK_COLUMNS, "text": pl.String})
EMPTY_EVENTS: Final = pl.DataFrame(
    schema={**_CHUNK_COLUMNS, "event_id": pl.String, "data": pl.String, "id_only": pl.Boolean}
)
