"""analyzer.ingest.mitm: mitmproxy dumps as capture records."""

from __future__ import annotations

import contextlib
import io as stdio
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.ingest.common import UnreadableInput
from analyzer.ingest.mitm import read_mitm
from tests.support.examples import examples
from tests.support.memory import traced_peak
from tests.support.progress import assert_half_then_whole, read_with_progress


def _flow(**kw: Any) -> Any:
    from mitmproxy import http
    from mitmproxy.test import tflow

    flow = tflow.tflow()
    flow.request = http.Request.make("GET", "http://mcp.test/mcp", b"", {"Mcp-Session-Id": "S"})
    flow.request.timestamp_start = 1750000000.0
    flow.response = http.Response.make(
        200, b"id: 1\ndata: {}\n\n", {"Content-Type": "text/event-stream"}
    )
    flow.response.timestamp_start = 1750000000.1
    flow.response.timestamp_end = 1750000000.2
    flow.client_conn.peername = ("10.0.0.7", 5000)
    flow.error = None
    for key, value in kw.items():
        setattr(flow, key, value)
    return flow


def _read(tmp_path: Path, flows: list[Any]) -> tuple[Any, pl.DataFrame]:
    from mitmproxy import io

    path = tmp_path / "d.mitm"
    with path.open("wb") as fh:
        writer = io.FlowWriter(fh)
        for flow in flows:
            writer.add(flow)
    out = tmp_path / "out"
    out.mkdir()
    report = read_mitm(path, out)
    return report, pl.read_parquet(sorted(out.glob("flows-*.parquet")))


def test_event_stream_body_becomes_events(tmp_path: Path) -> None:
    report, flows = _read(tmp_path, [_flow()])
    assert report.kind == "mitm" and report.counts == {}
    row = flows.row(0, named=True)
    assert (row["client_ip"], row["events"], row["end_how"]) == ("10.0.0.7", 1, "complete")


def test_streamed_body_is_reported_missing(tmp_path: Path) -> None:
    flow = _flow()
    flow.response.raw_content = None  # what mitmproxy keeps of a streamed body
    report, flows = _read(tmp_path, [flow])
    assert report.counts == {"body_missing": 1}
    assert "1 streamed response body(ies) not kept by the dump" in report.warnings
    assert flows["body_missing"].to_list() == [True]
    assert flows["events"].to_list() == [0]


def test_flow_without_response(tmp_path: Path) -> None:
    from mitmproxy import flow as mflow

    failed = _flow(response=None, error=mflow.Error("connection refused", 1750000000.3))
    _, flows = _read(tmp_path, [failed])
    row = flows.row(0, named=True)
    assert (row["status"], row["end_how"], row["end_error"]) == (
        None,
        "error",
        "connection refused",
    )


def test_not_a_dump(tmp_path: Path) -> None:
    (tmp_path / "x.mitm").write_bytes(b"definitely not tnetstring")
    with pytest.raises(UnreadableInput):
        read_mitm(tmp_path / "x.mitm", tmp_path)


def test_progress_follows_the_dump_to_its_end(tmp_path: Path) -> None:
    # Loading the one flow fills the first half of the bar, converting it the second.
    from mitmproxy import io

    path = tmp_path / "d.mitm"
    with path.open("wb") as fh:
        io.FlowWriter(fh).add(_flow())
    calls = read_with_progress(read_mitm, path, tmp_path / "out")
    assert_half_then_whole(calls, path.stat().st_size)


def _bad_flows() -> list[Any]:
    """Flows no table can hold: undecodable names, times and a status past their columns."""
    path = _flow()
    path.request.path = "/mcp\udcff"  # the byte 0xFF: mitmproxy decodes it to a surrogate
    method = _flow()
    method.request.method = "G\udcffT"
    endless = _flow()
    endless.response.timestamp_end = float("inf")
    far = _flow()
    far.request.timestamp_start = 1e300
    status = _flow()
    status.response.status_code = 10**12
    return [path, method, endless, far, status]


def test_flows_no_table_can_hold_are_counted_and_skipped(tmp_path: Path) -> None:
    report, flows = _read(tmp_path, [_flow(), *_bad_flows()])
    assert report.counts == {"mitm_bad_flow": 5}
    assert report.skipped == 5
    assert flows.height == 1 and flows["path"].to_list() == ["/mcp"]


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    import json

    from analyzer import cli

    code = cli.main(["analyze", "--no-cache", "--format", "json", str(path)])
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def test_bad_flows_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _read(tmp_path, [_flow(), *_bad_flows()])
    code, report = _analyze(tmp_path / "d.mitm", capsys)
    assert code == 0
    assert report["inputs"][0]["warnings"] == ["5 dump flow(s) skipped (unreadable)"]


def test_an_empty_dump_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "e.mitm"
    path.write_bytes(b"")
    report = read_mitm(path, tmp_path)
    assert (report.records, report.counts) == (0, {"empty_input": 1})
    assert report.warnings == ("1 input(s) without any HTTP flow (empty)",)
    code, analyzed = _analyze(path, capsys)
    assert code == 0
    assert analyzed["inputs"][0]["warnings"] == list(report.warnings)
    health = [f for f in analyzed["findings"] if f["detector"] == "capture-health"]
    assert [f["title"] for f in health] == ["e.mitm: 1 input(s) without any HTTP flow (empty)"]


def _encoded(flow: Any, content_encoding: str, raw: bytes) -> Any:
    flow.response.headers["Content-Encoding"] = content_encoding
    flow.response.raw_content = raw
    return flow


def test_a_compressed_event_stream_is_decoded(tmp_path: Path) -> None:
    import gzip

    flow = _encoded(_flow(), "gzip", gzip.compress(b"id: 1\ndata: {}\n\nid: 2\ndata: {}\n\n"))
    report, flows = _read(tmp_path, [flow])
    assert report.counts == {}
    assert flows.row(0, named=True)["events"] == 2


def test_a_body_the_dump_holds_in_an_unknown_coding_is_a_gap_not_events(tmp_path: Path) -> None:
    report, flows = _read(tmp_path, [_encoded(_flow(), "compress", b"\x1f\x9d\x90 whatever")])
    assert report.counts == {"undecoded_body": 1}
    row = flows.row(0, named=True)
    assert (row["events"], row["body_missing"], row["end_how"]) == (0, True, "complete")
    assert row["end_error"] == "unsupported content-encoding: compress"


def test_a_decompression_bomb_in_a_dump_costs_its_head_only(tmp_path: Path) -> None:
    import zlib

    from mitmproxy import http

    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    bomb = b"".join([squeeze.compress(block) for _ in range(512)] + [squeeze.flush()])
    flow = _flow()
    flow.response = http.Response.make(200, b"", {"Content-Type": "application/json"})
    flow.response.timestamp_start, flow.response.timestamp_end = 1750000000.1, 1750000000.2
    _encoded(flow, "gzip", bomb)  # 512 MiB of spaces once inflated
    (_, flows), peak = traced_peak(lambda: _read(tmp_path, [flow]))
    assert peak < 128 << 20, f"reading the dump took {peak >> 20} MiB at its peak"
    assert flows.row(0, named=True)["response_truncated_bytes"] > 0


def test_a_json_answer_the_dump_holds_in_an_unknown_coding_is_a_gap(tmp_path: Path) -> None:
    from mitmproxy import http

    flow = _flow()
    flow.response = http.Response.make(200, b"", {"Content-Type": "application/json"})
    flow.response.timestamp_start, flow.response.timestamp_end = 1750000000.1, 1750000000.2
    report, flows = _read(tmp_path, [_encoded(flow, "compress", b'\x1f\x9d{"jsonrpc":"2.0"}')])
    assert report.counts == {"undecoded_body": 1}
    assert flows.row(0, named=True)["body_missing"] is True


def _nested(depth: int) -> bytes:
    """A tnetstring of `depth` lists, one inside the other."""
    frame = b"0:~"
    for _ in range(depth):
        frame = b"%d:%b]" % (len(frame), frame)
    return frame


def _dump(tmp_path: Path, flows: list[Any], tail: bytes = b"") -> Path:
    from mitmproxy import io

    path = tmp_path / "d.mitm"
    with path.open("wb") as fh:
        writer = io.FlowWriter(fh)
        for flow in flows:
            writer.add(flow)
        fh.write(tail)
    return path


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        # A length prefix asking for 100 GB: mitmproxy's reader allocates it (MemoryError).
        (b"99999999999:", "a frame of 99999999999 bytes where 12 remain"),
        # 3,000 nested lists: mitmproxy's reader recurses once a level (RecursionError).
        (_nested(3000), "nested deeper than 64 levels"),
        (b"abc", "no length prefix"),
        (b"3:abcX", "unknown type tag"),
    ],
)
def test_a_hostile_dump_is_unreadable_in_one_line(
    tmp_path: Path, content: bytes, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from analyzer import cli

    path = tmp_path / "x.mitm"
    path.write_bytes(content)
    with pytest.raises(UnreadableInput, match=reason):
        read_mitm(path, tmp_path)
    assert cli.main(["analyze", "--no-cache", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"seamwatch: {path}: not a mitmproxy dump (") and err.count("\n") == 1


@pytest.mark.parametrize(
    "tail",
    [
        b"99999999999:",  # a huge length prefix (MemoryError in mitmproxy's reader)
        b"garbage12byt",  # no length prefix at all
        _nested(3000),  # too deep
        b"5:hello",  # torn: the file ends inside a frame
    ],
)
def test_damage_after_good_flows_keeps_them(tmp_path: Path, tail: bytes) -> None:
    flows = [_flow(), _flow(), _flow()]
    path = _dump(tmp_path, flows, tail)
    out = tmp_path / "out"
    out.mkdir()
    report = read_mitm(path, out)
    assert report.counts == {"mitm_damaged": 1}
    assert report.warnings == ("1 dump damaged: the rest after the last readable flow skipped",)
    kept = pl.read_parquet(sorted(out.glob("flows-*.parquet")))
    assert sorted(kept["flow_id"].to_list()) == sorted(str(f.id) for f in flows)


def test_damage_is_a_capture_health_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _dump(tmp_path, [_flow()], b"99999999999:")
    code, analyzed = _analyze(path, capsys)
    assert code == 0  # the damage is low: the default gate is medium
    health = [f for f in analyzed["findings"] if f["detector"] == "capture-health"]
    assert [(f["severity"], f["title"]) for f in health] == [
        ("low", "d.mitm: 1 dump damaged: the rest after the last readable flow skipped")
    ]


def test_a_frame_that_is_no_flow_is_skipped_alone(tmp_path: Path) -> None:
    from mitmproxy.io import tnetstring

    first, last = _flow(), _flow()
    path = _dump(tmp_path, [first])
    with path.open("ab") as fh:
        fh.write(tnetstring.dumps({b"not": b"a flow"}))
        from mitmproxy import io

        io.FlowWriter(fh).add(last)
    out = tmp_path / "out"
    out.mkdir()
    report = read_mitm(path, out)
    assert report.counts == {"mitm_bad_flow": 1}
    kept = pl.read_parquet(sorted(out.glob("flows-*.parquet")))
    assert sorted(kept["flow_id"].to_list()) == sorted([str(first.id), str(last.id)])


# --- fuzz: no exception but the documented one (UnreadableInput) ------------------------------


def _valid_dump() -> bytes:
    from mitmproxy import io

    buffer = stdio.BytesIO()
    writer = io.FlowWriter(buffer)
    for _ in range(2):
        writer.add(_flow())
    return buffer.getvalue()


_DUMP = _valid_dump()
_TNETSTRINGISH = st.one_of(
    st.from_regex(rb"\A[0-9]{1,13}:[\x00-\xff]{0,12}\Z"),
    st.integers(1, 4000).map(_nested),
    st.lists(
        st.tuples(st.binary(max_size=6), st.sampled_from(list(b",;#^!~}]x"))).map(
            lambda item: b"%d:%b%c" % (len(item[0]), item[0], item[1])
        ),
        max_size=5,
    ).map(b"".join),
)


@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_fuzz_mitm_reader_raises_nothing_undocumented(tmp_path: Path, data: st.DataObject) -> None:
    choice = data.draw(st.sampled_from(["bytes", "flipped", "cut", "appended", "framed"]))
    if choice == "bytes":
        raw = data.draw(st.binary(max_size=300))
    elif choice == "flipped":  # a real dump with a few bytes changed anywhere
        raw = bytearray(_DUMP)
        for _ in range(data.draw(st.integers(1, 6))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        raw = bytes(raw)
    elif choice == "cut":
        raw = _DUMP[: data.draw(st.integers(0, len(_DUMP)))]
    elif choice == "appended":
        raw = _DUMP + data.draw(st.binary(max_size=60))
    else:  # tnetstring-shaped garbage: length prefixes of any size, nesting, any tags
        head = data.draw(st.sampled_from([b"", _DUMP]))
        raw = head + data.draw(_TNETSTRINGISH)
    path = tmp_path / "fuzz.mitm"
    path.write_bytes(raw)
    out = tmp_path / "fuzz-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    with contextlib.suppress(UnreadableInput):  # documented: exit 2 in one line
        read_mitm(path, out)
