"""analyzer.ingest.read_inputs: kinds, the cache, and one timeline whatever the format."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from analyzer.ingest import UnreadableInput, input_kind, read_inputs
from analyzer.timeline import RawTables, build_timeline
from tests.support import traffic


def _capture_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "capture"
    folder.mkdir()
    lines = [json.dumps(r).encode() + b"\n" for r in traffic.capture_records()]
    (folder / "c.jsonl").write_bytes(b"".join(lines))
    return folder


def test_input_kind_by_name_and_content(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl.partial").write_text("")
    (tmp_path / "b.har").write_text("{}")
    (tmp_path / "c.mitm").write_bytes(b"")
    (tmp_path / "d").write_text('{"kind":"capture_open"}\n')
    (tmp_path / "e").write_text('{"log": {}}')
    (tmp_path / "f").write_bytes(b"1688:9:websocket;")
    (tmp_path / "g").write_text("hello")
    names = ["a.jsonl.partial", "b.har", "c.mitm", "d", "e", "f"]
    kinds = [input_kind(tmp_path / n) for n in names]
    assert kinds == ["capture", "har", "mitm", "capture", "har", "mitm"]
    assert input_kind(tmp_path) == "capture"
    with pytest.raises(UnreadableInput):
        input_kind(tmp_path / "g")
    with pytest.raises(UnreadableInput):
        input_kind(tmp_path / "missing")


def test_second_read_comes_from_the_cache(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    first = read_inputs([folder])
    second = read_inputs([folder])
    assert (first.inputs[0].cached, second.inputs[0].cached) == (False, True)
    assert first.directories == second.directories
    assert second.inputs[0].records == first.inputs[0].records
    assert second.scan("flows").collect().equals(first.scan("flows").collect())


def test_a_cached_input_is_reported_under_the_path_given_now(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    read_inputs([folder])
    alias = tmp_path / "alias"
    alias.symlink_to(folder)  # the same files: the same cache entry
    (report,) = read_inputs([alias]).inputs
    assert report.cached
    assert (report.path, report.files) == (str(alias), (str(alias / "c.jsonl"),))
    (single,) = read_inputs([alias / "c.jsonl"]).inputs
    assert (single.path, single.files) == (str(alias / "c.jsonl"), (str(alias / "c.jsonl"),))


def test_a_part_damaged_in_place_is_found_and_the_input_parsed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _capture_dir(tmp_path)
    first = read_inputs([folder])
    assert first.directories[0] is not None
    (part,) = first.directories[0].glob("events-*.parquet")
    data = bytearray(part.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 8] = bytes(b ^ 0x5A for b in data[middle : middle + 8])
    part.write_bytes(data)
    second = read_inputs([folder])
    assert "does not match its SHA-256" in caplog.text
    assert not second.inputs[0].cached
    assert second.inputs[0] == first.inputs[0]
    assert second.scan("events").collect().equals(first.scan("events").collect())
    assert read_inputs([folder]).inputs[0].cached  # the new entry is read next time


def test_a_changed_capture_is_parsed_again(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    first = read_inputs([folder])
    path = folder / "c.jsonl"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    second = read_inputs([folder])
    assert not second.inputs[0].cached
    assert first.directories != second.directories
    assert first.directories[0] is not None and not first.directories[0].exists()


def test_options_are_part_of_the_key(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    read_inputs([folder])
    again = read_inputs([folder], replica_header="X-Served-By")
    assert not again.inputs[0].cached
    replicas = again.scan("flows").collect()["replica"].to_list()
    assert replicas == ["r1", "r1", "r2", "r2"]


def test_same_files_twice_are_read_once(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    ingested = read_inputs([folder, folder / "c.jsonl"], cache=False)
    assert ingested.inputs[1].counts == {"duplicate_input": 1}
    assert ingested.scan("flows").collect().height == 4


def test_no_cache_leaves_the_capture_folder_alone(tmp_path: Path) -> None:
    folder = _capture_dir(tmp_path)
    read_inputs([folder], cache=False)
    assert not (folder / ".seamwatch-cache").exists()


_STRUCTURE = {
    "sessions": ["session_id", "kind", "era", "end_how", "initialized", "flows", "streams"],
    "streams": ["session_id", "kind", "request_id", "incarnations", "events", "response_delivered"],
    "incarnations": ["session_id", "incarnation", "cursor", "replica", "events", "delivered_response"],
    "resumptions": ["session_id", "cursor", "status", "answer_incarnation", "replica_changed", "response_owed"],
    "tool_calls": ["session_id", "request_id", "tool_name", "first_outcome", "result_delivered", "result_incarnation"],
}  # fmt: skip


def _structure(paths: list[Path]) -> dict[str, pl.DataFrame]:
    timeline = read_timeline(paths, replica_header="x-served-by", cache=False)
    return {
        name: getattr(timeline, name).select(cols).collect() for name, cols in _STRUCTURE.items()
    }


def test_capture_dump_and_har_give_the_same_timeline(tmp_path: Path) -> None:
    capture = _structure([_capture_dir(tmp_path)])
    dump = _structure([traffic.write_mitm(tmp_path / "t.mitm")])
    har = _structure([traffic.write_har(tmp_path / "t.har")])
    assert capture["resumptions"]["status"].to_list() == ["resolved"]
    assert capture["tool_calls"]["result_incarnation"].to_list() == [1]
    for name in _STRUCTURE:
        assert dump[name].equals(capture[name]), name
        assert har[name].equals(capture[name]), name


def test_timeline_from_records_in_memory_equals_the_one_from_disk(tmp_path: Path) -> None:
    from analyzer.normalize import normalize_records

    memory = build_timeline(RawTables.from_frames(normalize_records(traffic.capture_records())))
    disk = read_timeline([_capture_dir(tmp_path)], cache=False)
    for name in ("exchanges", "streams", "incarnations", "resumptions", "tool_calls", "sessions"):
        assert getattr(memory, name).collect().equals(getattr(disk, name).collect()), name


@pytest.mark.parametrize("name", ["cap.jsonl", "dump.mitm", "plain"])
def test_a_fifo_is_called_what_it_is(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(UnreadableInput) as e:
        input_kind(fifo)  # and returns at once: a reader would block on it
    assert str(e.value) == f"{fifo}: a FIFO (named pipe), not a file or folder of captures"


def test_permission_denied_names_the_file_of_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analyzer.ingest

    folder = _capture_dir(tmp_path)
    (denied,) = folder.glob("*.jsonl")

    # Root reads any file, so the refusal an unprivileged user gets is raised as the OS would.
    def refuse(kind: str, files: list[Path], **options: object) -> str:
        raise PermissionError(13, "Permission denied", str(denied))

    monkeypatch.setattr(analyzer.ingest, "input_key", refuse)
    with pytest.raises(UnreadableInput) as e:
        read_inputs([folder], cache=False)
    assert str(e.value) == f"{folder}: {denied}: Permission denied"
