"""analyzer.ingest.jsonl: tolerant reading of capture files, damage counted per kind."""

# ruff: noqa: E501  (hand-built records are tables, one record a line)

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analyzer import memory
from analyzer.ingest import bulk, jsonl, lines
from analyzer.ingest.common import InputReport, UnreadableInput, UnsupportedSchema
from analyzer.ingest.jsonl import read_capture
from tests.support.examples import examples
from tests.support.records import Capture, event, req, res, sse


def _session() -> Capture:
    """A small clean run: initialize, a tools/call answered on an event stream."""
    c = Capture().open()
    f = c.request(body=req("initialize", 1, protocolVersion="2025-11-25"))
    c.response(f, body=res(1, protocolVersion="2025-11-25"), headers={"mcp-session-id": "S"})
    g = c.request(
        body=req("tools/call", 2, name="t", arguments={}), headers={"mcp-session-id": "S"}
    )
    c.response(g, sse=True)
    c.chunk(g, sse(event(id="1", data="")), n=0)
    c.chunk(g, sse(event(req("notifications/progress", progress=1), id="2")), n=1)
    c.chunk(g, sse(event(res(2, content=[]), id="3")), n=2)
    c.end(g)
    c.close()
    return c


def _read(
    tmp_path: Path, data: bytes, name: str = "cap.jsonl", workers: int = 1
) -> tuple[InputReport, Path]:
    folder = tmp_path / "capture"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return read_capture(folder, out, workers=workers), out


def _events(out: Path) -> list[str]:
    frame = pl.read_parquet(sorted(out.glob("events-*.parquet")))
    return frame.sort("seq", "ordinal")["event_id"].to_list()


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def test_clean_capture_reads_everything(tmp_path: Path) -> None:
    c = _session()
    report, out = _read(tmp_path, _join(c.lines()))
    assert (report.records, report.skipped, dict(report.counts)) == (len(c.records), 0, {})
    assert report.warnings == ()
    assert _events(out) == ["1", "2", "3"]


def test_torn_last_line_is_counted_and_skipped(tmp_path: Path) -> None:
    lines = _session().lines()
    data = _join(lines[:-1]) + lines[-1][:25]  # the close record, cut mid-line
    report, out = _read(tmp_path, data, "cap.jsonl.partial")
    assert report.counts == {"torn_line": 1, "missing_close": 1}
    assert report.skipped == 1
    assert "1 torn last line(s) skipped" in report.warnings
    assert _events(out) == ["1", "2", "3"]


def test_last_line_without_newline_that_parses_is_kept(tmp_path: Path) -> None:
    data = _join(_session().lines()).rstrip(b"\n")
    report, _ = _read(tmp_path, data)
    assert report.counts == {}


def test_corrupt_middle_line_is_counted_and_skipped(tmp_path: Path) -> None:
    lines = _session().lines()
    lines[6] = lines[6][:40] + b"#garbage"  # chunk n=1: its event is lost, nothing else
    report, out = _read(tmp_path, _join(lines))
    assert report.counts == {"corrupt_line": 1, "chunk_gap": 1}
    assert _events(out) == ["1", "3"]


def test_invalid_utf8_line_is_counted_and_skipped(tmp_path: Path) -> None:
    lines = _session().lines()
    lines[6] = lines[6].replace(b"progress", b"pro\xffgress")
    report, out = _read(tmp_path, _join(lines))
    assert report.counts == {"invalid_utf8": 1, "chunk_gap": 1}
    assert _events(out) == ["1", "3"]


def test_bom_is_counted_and_the_line_read(tmp_path: Path) -> None:
    report, out = _read(tmp_path, b"\xef\xbb\xbf" + _join(_session().lines()))
    assert report.counts == {"bom": 1}
    assert report.skipped == 0
    assert _events(out) == ["1", "2", "3"]


def test_seq_gap_counts_the_missing_records(tmp_path: Path) -> None:
    lines = _session().lines()
    del lines[3:5]  # two records lost on disk: the call's request and response
    report, _ = _read(tmp_path, _join(lines))
    assert report.counts == {"seq_gap": 2}
    assert "2 record(s) missing (gaps in seq)" in report.warnings


@pytest.mark.parametrize(("recorded", "counts"), [(True, "retention_deleted"), (False, "seq_gap")])
def test_records_the_proxys_retention_deleted_are_a_note_not_a_gap(
    tmp_path: Path, recorded: bool, counts: str
) -> None:
    """The run's file 0 (its first 4 records) was deleted by `--max-size`: file 1's
    capture_open says so (`retention.cut`, schema 1.3); without it, the same is a gap."""
    records = _session().records
    kept = [{**r, "seq": r["seq"] + 1} for r in records[4:]]
    reopened = {**records[0], "seq": 4, "file_index": 1}
    if recorded:
        reopened["retention"] = {
            "max_bytes": 1 << 20,
            "max_age_s": None,
            "deleted": [],
            "cut": {reopened["run_id"]: 3, "another-run": 99},
        }
    lines = [json.dumps(r).encode() for r in [reopened, *kept]]
    report, _ = _read(tmp_path, _join(lines))
    assert report.counts == {counts: 4}


def test_missing_capture_close_is_an_unclean_stop(tmp_path: Path) -> None:
    report, _ = _read(tmp_path, _join(_session().lines()[:-1]))
    assert report.counts == {"missing_close": 1}


def test_duplicated_records_are_counted_and_skipped_once(tmp_path: Path) -> None:
    lines = _session().lines()
    lines.insert(8, lines[7])  # a chunk twice
    lines.insert(3, lines[2])  # a response twice
    lines.insert(0, lines[0])  # capture_open twice
    report, out = _read(tmp_path, _join(lines))
    assert report.counts == {"duplicate_record": 3}
    assert report.skipped == 3
    assert _events(out) == ["1", "2", "3"]


def test_blank_and_malformed_records(tmp_path: Path) -> None:
    lines = _session().lines()
    lines.insert(2, b"")
    lines.insert(2, b'{"kind":"chunk","seq":99,"ts_ns":1,"mono_ns":1}')  # no flow
    lines.insert(2, b'{"kind":"future_kind","seq":98,"ts_ns":1,"mono_ns":1}')
    report, _ = _read(tmp_path, _join(lines))
    assert report.counts == {"blank_line": 1, "invalid_record": 1, "unknown_kind": 1}


def test_unknown_schema_major_is_an_error(tmp_path: Path) -> None:
    lines = _session().lines()
    record = json.loads(lines[0])
    record["schema"] = "2.0"
    lines[0] = json.dumps(record).encode()
    with pytest.raises(UnsupportedSchema, match=r"schema 2\.0 is not supported"):
        _read(tmp_path, _join(lines))


def test_newer_minor_is_a_note(tmp_path: Path) -> None:
    c = Capture().open(schema="1.9")
    c.close()
    report, _ = _read(tmp_path, _join(c.lines()))
    assert report.counts == {"newer_minor": 1}


def test_missing_path_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput):
        read_capture(tmp_path / "nope", tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnreadableInput, match="no capture files"):
        read_capture(tmp_path / "empty", tmp_path)


def test_rotated_files_are_read_in_rotation_order(tmp_path: Path) -> None:
    """A stream cut by rotation: its chunks continue in the next file (named out of order)."""
    c = Capture(run_id="run-r").open(file_index=0)
    f = c.request("GET", headers={"mcp-session-id": "S"})
    c.response(f, sse=True)
    c.chunk(f, 'id: a\ndata: {"x":', n=0)  # incomplete: completed in the next file
    first = c.lines()
    c.records.clear()
    c.open(file_index=1)
    c.chunk(f, "1}\n\nid: b\ndata: 2\n\n", n=1)
    c.end(f)
    c.close()
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "z-0000.jsonl").write_bytes(_join(first))
    (folder / "a-0001.jsonl.partial").write_bytes(_join(c.lines()))
    out = tmp_path / "out"
    out.mkdir()
    report = read_capture(folder, out, workers=1)
    assert report.counts == {}
    assert report.files == (str(folder / "z-0000.jsonl"), str(folder / "a-0001.jsonl.partial"))
    assert _events(out) == ["a", "b"]


def test_partial_beside_its_renamed_file_is_read_once(tmp_path: Path) -> None:
    data = _join(_session().lines())
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "cap.jsonl").write_bytes(data)
    (folder / "cap.jsonl.partial").write_bytes(data[:-40])
    out = tmp_path / "out"
    out.mkdir()
    report = read_capture(folder, out, workers=1)
    assert report.counts == {"duplicate_file": 1}
    assert report.files == (str(folder / "cap.jsonl"),)


def test_two_workers_read_what_one_reads(tmp_path: Path) -> None:
    """Flows are split between processes by flow id; the tables and counts are the same."""
    c = Capture().open()
    for k in range(40):
        f = c.request("GET", headers={"mcp-session-id": f"S{k % 3}"}, client=f"10.0.0.{k}:1")
        c.response(f, sse=True)
        for n in range(3):
            c.chunk(f, sse(event({"k": k, "n": n}, id=f"{k}-{n}")), n=n)
        c.end(f)
    c.close()
    lines = c.lines()
    lines[30] = b"{broken"
    data = _join(lines)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one, out_one = _read(tmp_path / "one", data)
    two, out_two = _read(tmp_path / "two", data, workers=2)
    assert one.counts == two.counts
    assert one.counts["corrupt_line"] == 1
    assert one.records == two.records
    for table in ("flows", "events", "messages", "payloads"):
        a = pl.read_parquet(sorted(out_one.glob(f"{table}-*.parquet")))
        b = pl.read_parquet(sorted(out_two.glob(f"{table}-*.parquet")))
        key = a.columns[:3]
        assert a.sort(key).equals(b.sort(key)), table


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_follows_the_bytes_up_to_the_total(
    tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`progress(done, total)` climbs block by block (blocks made small here) to the size."""
    monkeypatch.setattr("analyzer.ingest.jsonl._READ_BLOCK", 1 << 10)  # the in-process worker
    c = Capture().open()
    for k in range(60):
        f = c.request("GET", headers={"mcp-session-id": "S"})
        c.response(f, sse=True)
        c.chunk(f, sse(event({"k": k}, id=str(k))), n=0)
        c.end(f)
    c.close()
    data = _join(c.lines())
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "cap.jsonl").write_bytes(data)
    seen: list[tuple[int, int]] = []
    read_capture(folder, tmp_path, workers=workers, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (len(data), len(data))
    assert all(total == len(data) for _, total in seen)
    done = [d for d, _ in seen]
    assert done == sorted(done)
    if workers == 1:
        assert len(set(done)) > 10  # one report a (1 KiB) block, not one at the end


def test_a_failing_worker_raises_in_the_parent_through_the_progress_loop(tmp_path: Path) -> None:
    """A pool worker that cannot read its file: its OSError reaches the caller of `_run`
    (`read_capture` turns it into UnreadableInput), out of the loop that reports progress."""
    from analyzer.ingest import jsonl

    gone = lines.CaptureFile(str(tmp_path / "gone.jsonl"), "run", "run", None, 0, 0, 10)
    tasks = [jsonl._Task((gone,), part, 2, str(tmp_path), "c", None, None, 100) for part in (0, 1)]
    seen: list[int] = []
    with pytest.raises(FileNotFoundError):
        jsonl._run(tasks, tmp_path, seen.append)


# --- the fast lane for chunk lines takes exactly what the full path takes -------------------

_odd_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**30, -1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=2) | st.dictionaries(st.text(max_size=3), children, max_size=2)
    ),
    max_leaves=4,
)


@st.composite
def _chunk_lines(draw: st.DrawFn) -> bytes:
    """Chunk lines as the recorder writes them, with some fields made odd: big ints, floats,
    nesting, missing or extra members, and sometimes a damaged text or byte."""
    record: dict[str, Any] = {
        "kind": "chunk",
        "ts_ns": draw(st.integers(0, 2**63 - 1)),
        "mono_ns": draw(st.integers(0, 2**63 - 1)),
        "flow": draw(st.text(max_size=6)),
        "n": draw(st.integers(-2, 5)),
        "content_encoding": None,
        "data": draw(
            st.fixed_dictionaries({"text": st.text(max_size=12)})
            | st.fixed_dictionaries({"b64": st.sampled_from(["", "aGk=", "!!"])})
        ),
        "seq": draw(st.integers(-1, 2**63 - 1)),
    }
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from([*record, "decompress_capped", "extra"]))
        if draw(st.booleans()):
            record[key] = draw(_odd_values)
        elif draw(st.booleans()):
            record.pop(key, None)
        elif isinstance(record.get("data"), dict):
            record["data"][draw(st.sampled_from(["text", "b64", "truncated_bytes"]))] = draw(
                _odd_values
            )
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    damage = draw(st.sampled_from(["", "", "", "deep", "surrogate", "nan", "byte"]))
    if damage == "deep":
        text = text[:-1] + ', "x": ' + "[" * 300 + "]" * 300 + "}"
    elif damage == "surrogate":
        text = text[:-1] + ', "x": "\\ud800"}'
    elif damage == "nan":
        text = text[:-1] + ', "x": NaN}'
    line = text.encode("utf-8")
    if damage == "byte" and line:
        at = draw(st.integers(0, len(line) - 1))
        line = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
    return line


@settings(max_examples=examples(1500), deadline=None)
@given(_chunk_lines())
def test_bulk_lane_takes_a_line_only_as_the_full_path_reads_it(line: bytes) -> None:
    chunks, _ = bulk.read_chunks([line])
    if not chunks.height:
        return
    counts: Counter[str] = Counter()
    full = lines.parse_line(line, False, counts, pydantic_core.from_json)
    assert not counts
    assert full is not None
    taken = chunks.row(0, named=True)
    assert (full["flow"], full["n"], full["ts_ns"], full["seq"], full["data"]) == (
        taken["flow_id"],
        taken["n"],
        taken["ts"],
        taken["seq"],
        {"text": taken["text"]},
    )
    assert not full.get("decompress_capped")


def _odd_capture() -> bytes:
    """A capture whose chunk lines take the fast lane, or not, for every reason there is."""
    c = Capture().open()
    f = c.request(headers={"mcp-session-id": "S"})
    c.response(f, sse=True)
    for n in range(4):
        c.chunk(f, sse(event(req("notifications/progress", progress=n), id=str(n))), n=n)
    c.chunk(f, sse(event(req("notifications/progress", progress=9), id="9")), n=2)  # duplicate
    c.chunk(f, sse(event(res(2, content=[]), id="7")), n=6)  # a gap
    c.close()
    c.records[-2]["decompress_capped"] = True
    lines = [json.dumps(r, separators=(",", ":")).encode() for r in c.records]
    odd = []
    for i, line in enumerate(lines):
        odd.append(line)
        if b'"kind":"chunk"' in line:
            record = json.loads(line)
            variant = i % 5
            if variant == 0:
                record["mono_ns"] = 2**64 + i  # a big int: orjson would read a float
            elif variant == 1:
                record["seq"] = float(record["seq"])  # no int: invalid either way
            elif variant == 2:
                record["extra"] = [[{"deep": 1}]]
            elif variant == 3:
                record["decompress_capped"] = 1.5
            else:
                record["data"]["truncated_bytes"] = 2**70
            # the same chunk again: counted duplicate
            odd.append(json.dumps(record, separators=(",", ":")).encode())
    # Not base64: the normalizer raises, the reader counts an invalid record.
    odd.insert(-1, b'{"kind":"chunk","flow":"zz","n":0,"seq":99,"ts_ns":1,"data":{"b64":"a"}}')
    return b"\n".join(odd) + b"\n"


def test_bulk_lane_reads_what_the_full_path_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _odd_capture()
    (tmp_path / "fast").mkdir()
    (tmp_path / "full").mkdir()
    fast_report, fast_out = _read(tmp_path / "fast", data)
    owned = bulk.sieve
    monkeypatch.setattr(bulk, "sieve", lambda *args: ([], sorted(itertools.chain(*owned(*args)))))
    full_report, full_out = _read(tmp_path / "full", data)
    assert fast_report.counts == full_report.counts
    assert fast_report.records == full_report.records
    # Invalid: a float seq, a truncated_bytes past Int64, no base64. Duplicates: the n=2
    # resend, and each chunk line copied (6) but the two invalid ones.
    assert (fast_report.counts["invalid_record"], fast_report.counts["duplicate_record"]) == (3, 5)
    order = {"flows": ["flow_id"], "events": ["flow_id", "ordinal"], "messages": ["flow_id", "ordinal"], "payloads": ["data_hash"]}  # fmt: skip
    for table, keys in order.items():
        fast_frame = pl.read_parquet(sorted(fast_out.glob(f"{table}-*.parquet")))
        full_frame = pl.read_parquet(sorted(full_out.glob(f"{table}-*.parquet")))
        assert_frame_equal(fast_frame.sort(keys), full_frame.sort(keys))


def _with(line: bytes, field: str, value: Any) -> bytes:
    """The record on `line` with `field` (`body.x`, `data.x` for a member of those) set to
    `value`."""
    record = json.loads(line)
    outer, dot, inner = field.partition(".")
    if dot:
        record[outer][inner] = value
    else:
        record[field] = value
    return json.dumps(record).encode()  # big ints exact, lone surrogates as \\u escapes


def _read_with(tmp_path: Path, index: int, field: str, value: Any) -> tuple[InputReport, Path]:
    """`_read` of the `_session` capture with one field of its line `index` set to `value`."""
    lines = _session().lines()
    lines[index] = _with(lines[index], field, value)
    return _read(tmp_path, _join(lines))


@pytest.mark.parametrize(
    ("index", "field", "value"),
    [
        (6, "seq", 10**23),  # orjson reads it as a float: the full path
        (6, "seq", 2**63),  # orjson reads it as an int: the fast lane
        (6, "ts_ns", 2**63),
        (6, "ts_ns", -(2**63) - 1),
        (6, "n", 2**31),
        (6, "n", -1),
        (6, "data.truncated_bytes", -1),  # the fast lane too
        (6, "data.truncated_bytes", "12"),
        (3, "seq", 99999999999999999999999),
        (3, "ts_ns", 10**23),
        (4, "status", 2**31),
        (2, "body.truncated_bytes", 2**63),
        (2, "body.truncated_bytes", "12"),
        (3, "scheme", 5),
        (3, "upstream", ["a"]),
        (4, "replica", 5),
        (8, "error", 5),
    ],
)
def test_values_past_their_column_are_malformed_records(
    tmp_path: Path, index: int, field: str, value: Any
) -> None:
    report, out = _read_with(tmp_path, index, field, value)
    chunk = index == 6  # the chunk n=1: its event is lost and its gap counted
    assert report.counts == (
        {"invalid_record": 1, "chunk_gap": 1} if chunk else {"invalid_record": 1}
    )
    assert _events(out) == (["1", "3"] if chunk else ["1", "2", "3"])


@pytest.mark.parametrize(
    ("index", "field", "value"),
    [
        (3, "method", "PO\udc00ST"),
        (3, "path", "/m\udc00"),
        (3, "flow", "f\udc00"),
        (3, "headers", [["mcp-session-id", "S\udc00"]]),
        (4, "headers", [["x-unused", "\udc00"]]),  # a name the analysis never reads, too
        (8, "error", "reset \udc00"),
    ],
)
def test_lone_surrogates_in_names_make_the_record_malformed(
    tmp_path: Path, index: int, field: str, value: Any
) -> None:
    report, out = _read_with(tmp_path, index, field, value)
    assert report.counts == {"invalid_record": 1, "nonstrict_json": 1}
    flows = pl.read_parquet(sorted(out.glob("flows-*.parquet")))
    assert flows["flow_id"].sort().to_list() == ["f1", "f2"]


def test_lone_surrogates_in_payload_text_are_recorded(tmp_path: Path) -> None:
    lines = _session().lines()
    lines[2] = _with(lines[2], "body.text", '{"jsonrpc":"2.0","id":1,"result":"\udc00"}')
    lines[6] = _with(lines[6], "data", {"text": 'id: 2\ndata: {"a":"\udc00"}\n\n'})
    report, out = _read(tmp_path, _join(lines))
    assert report.counts == {"nonstrict_json": 2}
    assert _events(out) == ["1", "2", "3"]
    flows = pl.read_parquet(sorted(out.glob("flows-*.parquet")))
    body_hash = flows.filter(pl.col("flow_id") == "f1")["response_body_hash"].item()
    payloads = pl.read_parquet(sorted(out.glob("payloads-*.parquet")))
    stored = payloads.filter(pl.col("data_hash") == body_hash).row(0, named=True)
    # The body's bytes as they were recorded (a surrogate has no UTF-8 text): as base64.
    raw = '{"jsonrpc":"2.0","id":1,"result":"\udc00"}'.encode("utf-8", "surrogatepass")
    assert (stored["base64"], stored["text"]) == (True, base64.b64encode(raw).decode())


def test_a_line_nested_too_deep_is_corrupt(tmp_path: Path) -> None:
    lines = _session().lines()
    deep = b'{"seq":6,"kind":"chunk","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    lines.insert(6, deep)
    lines.insert(0, b"[" * 100_000 + b"]" * 100_000)  # the first line, read to plan the run
    report, out = _read(tmp_path, _join(lines))
    assert report.counts == {"corrupt_line": 2, "missing_open": 1}
    assert _events(out) == ["1", "2", "3"]


@pytest.mark.parametrize("schema", ["\u00b2.0", "1" * 5000 + ".0"])
def test_a_schema_of_odd_digits_is_unsupported(tmp_path: Path, schema: str) -> None:
    lines = _session().lines()
    lines[0] = _with(lines[0], "schema", schema)
    with pytest.raises(UnsupportedSchema, match=r"is not MAJOR\.MINOR"):
        _read(tmp_path, _join(lines))


_MINIMAL: dict[str, dict[str, Any]] = {
    "chunk": {"n": 0, "data": {"text": ""}},
    "request": {"method": "P", "path": "/", "headers": []},
    "response": {"status": 200, "headers": []},
}


def _minimal(kind: str, **fields: Any) -> dict[str, Any]:
    """The smallest valid record of `kind` (flow "f", seq 1, ts_ns 1), with `fields` set."""
    return {"kind": kind, "seq": 1, "ts_ns": 1, "flow": "f", **_MINIMAL[kind], **fields}


def _chunk(**fields: Any) -> dict[str, Any]:
    return _minimal("chunk", **fields)


def _request(**fields: Any) -> dict[str, Any]:
    return _minimal("request", **fields)


def _response(**fields: Any) -> dict[str, Any]:
    return _minimal("response", **fields)


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (_chunk(), None),
        (_chunk(seq=2**63 - 1, ts_ns=-(2**63), n=2**31 - 1), None),
        (_chunk(seq=2**63), "invalid_record"),
        (_chunk(ts_ns=2**63), "invalid_record"),
        (_chunk(n=2**31), "invalid_record"),
        (_response(status=-(2**31) - 1), "invalid_record"),
        (_response(body={"text": "", "truncated_bytes": -1}), "invalid_record"),
        (_response(replica_source=1), "invalid_record"),
        ({"kind": "server_unreachable", "seq": 1, "ts_ns": 1, "upstream": "u", "error": {}}, "invalid_record"),
    ],
)  # fmt: skip
def test_check_holds_integers_to_their_columns(record: dict[str, Any], problem: str | None) -> None:
    assert lines.check_record(record) == problem
    assert jsonl.record_problem(record) == problem


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (_request(method="P\udc00"), "invalid_record"),
        (_request(headers=[["a", "\ud800"]]), "invalid_record"),
        ({"kind": "capture_open", "seq": 1, "ts_ns": 1, "schema": "1.0", "run_id": "r", "x": {"\udc00": 1}}, "invalid_record"),
        (_request(path="/é", body={"text": "\udc00"}), None),  # payload: kept
        (_chunk(data={"text": "\udc00"}), None),  # payload: kept
        (_request(path=json.loads(r'"/\ud83d\ude00"')), None),  # a JSON pair: one character
    ],
)  # fmt: skip
def test_record_problem_refuses_lone_surrogates_outside_payloads(
    record: dict[str, Any], problem: str | None
) -> None:
    assert lines.check_record(record) is None
    assert jsonl.record_problem(record) == problem


def test_damaged_integers_and_surrogates_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from analyzer import cli

    lines = _session().lines()
    lines[3] = _with(lines[3], "method", "PO\udc00ST")
    lines[6] = _with(lines[6], "seq", 99999999999999999999999)
    path = tmp_path / "cap.jsonl"
    path.write_bytes(_join(lines))
    # The lost request makes f2 look like a GET stream (a medium finding): fail on high only.
    code = cli.main(["analyze", "--no-cache", "--fail-on", "high", "--format", "json", str(path)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    warnings = json.loads(out)["inputs"][0]["warnings"]
    assert "2 malformed record(s) skipped" in warnings


@pytest.mark.parametrize(
    "content",
    [b"", b"not json\n", b'{"a":1}\n', b'{"kind":"request","seq":"x"}\n'],
    ids=["empty", "garbage", "not-a-record", "invalid-record"],
)
def test_a_file_without_any_valid_record_is_unreadable(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UnreadableInput, match=f"^no capture records in {path}$"):
        read_capture(path, out)


def _environ(pid: int) -> bytes:
    """A process's environment as it started: empty while its exec is under way, so read
    again for a while (a worker waits for its pool's shutdown: it does not end before)."""
    path = Path(f"/proc/{pid}/environ")
    deadline = time.monotonic() + 30
    while not (environ := path.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return environ


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_the_parse_workers_start_with_their_allocator_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the analysis's setting (`analyzer.memory`), every pool worker starts with the
    parse workers' own; this process keeps the analysis's."""
    # As Polars' import leaves the analysis's setting (tests/test_memory.py checks the form).
    own = f"dirty_decay_ms:500,muzzy_decay_ms:1000,{memory.ANALYSIS}"
    monkeypatch.setenv(memory.VARIABLE, own)
    seen: list[set[bytes]] = []
    real = memory.starting_parse_workers

    @contextlib.contextmanager
    def watched() -> Iterator[None]:
        before = {child.pid for child in multiprocessing.active_children()}
        with real():
            yield
        # The workers started inside (not an earlier test's): what each was started with.
        started = [c.pid for c in multiprocessing.active_children() if c.pid not in before]
        seen.append({_environ(pid) for pid in started})

    monkeypatch.setattr("analyzer.ingest.jsonl.starting_parse_workers", watched)
    one, _ = _read(tmp_path, _join(_session().lines()), workers=2)
    assert one.records > 0
    assert len(seen) == 1 and len(seen[0]) >= 1
    wanted = f"{memory.VARIABLE}={memory.PARSE_WORKERS}".encode()
    for environ in seen[0]:
        assert wanted in environ.split(b"\0")
    assert os.environ[memory.VARIABLE] == own
