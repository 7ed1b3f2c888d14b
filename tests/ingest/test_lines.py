"""The shared line reader: what a line holds, and the health a run's records tell."""

from __future__ import annotations

from collections import Counter

import pydantic_core
import pytest

from analyzer.ingest.lines import RunState, mark_seq, missing_records, parse_line


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
