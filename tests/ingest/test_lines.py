"""The shared line reader: what a line holds, and the health a run's records tell."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pydantic_core
import pytest

from analyzer.ingest.lines import (
    RunState,
    capture_files,
    first_record,
    head,
    head_fields,
    mark_seq,
    missing_records,
    parse_line,
    plan,
    plan_heads,
)
from tests.support.rotated import write_rotated


@pytest.mark.parametrize(
    ("line", "torn", "counted"),
    [
        (b"", False, "blank_line"),
        (b'{"kind":"chunk","seq":1', True, "torn_line"),
        (b'{"kind":"chunk","seq":1', False, "corrupt_line"),
        (b'{"kind":"\xff"}', False, "invalid_utf8"),
        (b'{"kind":"nope","seq":1,"ts_ns":1}', False, "unknown_kind"),
        (
            b'{"kind":"stream_end","seq":1,"ts_ns":1,"flow":"f","how":"later"}',
            False,
            "invalid_record",
        ),
    ],
)
def test_an_unusable_line_is_counted_by_why(line: bytes, torn: bool, counted: str) -> None:
    counts: Counter[str] = Counter()
    assert parse_line(line, torn, counts, pydantic_core.from_json) is None
    assert counts == Counter({counted: 1})


def test_a_line_with_a_lone_surrogate_in_a_name_is_no_record() -> None:
    counts: Counter[str] = Counter()
    line = b'{"kind":"stream_end","seq":1,"ts_ns":1,"flow":"\\ud800","how":"complete"}'
    assert parse_line(line, False, counts, pydantic_core.from_json) is None
    assert counts == Counter({"nonstrict_json": 1, "invalid_record": 1})


def test_a_record_is_read_whole() -> None:
    counts: Counter[str] = Counter()
    line = b'{"kind":"stream_end","seq":4,"ts_ns":9,"flow":"f","how":"complete"}'
    record = parse_line(line, False, counts, pydantic_core.from_json)
    assert record == {"kind": "stream_end", "seq": 4, "ts_ns": 9, "flow": "f", "how": "complete"}
    assert not counts


@pytest.mark.parametrize(
    ("seqs", "missing"),
    [
        ([0, 1, 2, 3], 0),
        ([0, 1, 5, 6], 3),  # records 2-4 lost on disk
        ([3, 4], 3),  # the run's first records lost
        ([0, 1, 1, 2], 0),  # a repeated seq loses nothing
    ],
)
def test_missing_records_from_the_seq_change_points(seqs: list[int], missing: int) -> None:
    run = RunState()
    for position, seq in enumerate(seqs):
        mark_seq(run, position, seq)
    assert missing_records([run]) == missing


def test_files_planned_from_their_first_records_sent_as_json_are_planned_as_read(
    tmp_path: Path,
) -> None:
    """The Spark engine's executors send each file's `head_fields` (JSON) and the driver plans
    a URI folder from them: the same plan, counts and retention cuts as `plan` of the files."""
    folder = write_rotated(tmp_path / "capture")
    (folder / "capture-run-rot-0001.jsonl.partial").write_bytes(
        (folder / "capture-run-rot-0001.jsonl").read_bytes()  # left beside its renamed file
    )
    (folder / "stray.jsonl").write_bytes(b'{"kind":"chunk","seq":1}\n')  # no capture_open
    files = capture_files(folder)
    counts: Counter[str] = Counter()
    cuts: dict[str, int] = {}
    expected = plan(files, counts, cuts)
    sent = []
    for path in files:
        fields = head_fields(first_record(path.read_bytes()))
        said = None if fields is None else json.loads(json.dumps(fields))
        sent.append((str(path), said, path.stat().st_size))
    again: Counter[str] = Counter()
    again_cuts: dict[str, int] = {}
    assert plan_heads(sent, again, again_cuts) == expected
    assert (again, again_cuts) == (counts, cuts)
    assert counts["duplicate_file"] == 1 and counts["missing_open"] == 1
    # The stand-in run of the file without capture_open starts at 0: first.
    assert [Path(f.path).name for f in expected] == [
        "stray.jsonl",
        *(f"capture-run-rot-{i:04d}.jsonl" for i in range(3)),
    ]


@pytest.mark.parametrize(
    "content",
    [b'\xef\xbb\xbf{"kind":"capture_open"}\nrest', b'{"kind":"x"}', b"[1]\n", b"{\n", b""],
)
def test_the_first_record_of_bytes_is_the_one_head_reads(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    assert first_record(content) == head(path)[0]
