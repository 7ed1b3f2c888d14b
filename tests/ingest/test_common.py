"""analyzer.ingest.common: warnings from counts, reports, part files."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer import UserError
from analyzer.ingest import input_kind
from analyzer.ingest.common import (
    DAMAGE,
    IngestError,
    InputReport,
    PartWriter,
    UnsupportedSchema,
    describe_counts,
    os_reason,
)
from analyzer.normalize import normalize_records
from tests.support.records import Capture


def test_describe_counts_in_damage_order_skipping_zeros() -> None:
    counts = {"seq_gap": 3, "torn_line": 1, "bom": 0, "something_new": 2}
    assert describe_counts(counts) == (
        "1 torn last line(s) skipped",
        "3 record(s) missing (gaps in seq)",
        "2 something new",
    )
    assert all(words for words in DAMAGE.values())


def test_report_json_is_the_inputs_entry() -> None:
    report = InputReport(
        "cap", "capture", 10, 1, {"torn_line": 1}, ("1 torn last line(s) skipped",)
    )
    assert report.as_json() == {
        "path": "cap",
        "records": 10,
        "skipped": 1,
        "warnings": ["1 torn last line(s) skipped"],
    }


def test_part_writer_writes_non_empty_tables_private(tmp_path: Path) -> None:
    c = Capture()
    c.response(c.request("GET"), 405)
    writer = PartWriter(tmp_path, "x")
    writer.write(normalize_records(c.records))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["flows-x-00000.parquet"]
    assert (tmp_path / names[0]).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            PermissionError(13, "Permission denied", "/cap/run-0000.jsonl"),
            "/cap: /cap/run-0000.jsonl: Permission denied",
        ),
        (PermissionError(13, "Permission denied", "/cap"), "/cap: Permission denied"),
        (OSError(5, "Input/output error"), "/cap: Input/output error"),
    ],
)
def test_os_reason_names_the_file_that_failed(error: OSError, said: str) -> None:
    assert os_reason(Path("/cap"), error) == said


def test_an_input_that_cannot_be_read_is_a_user_error(tmp_path: Path) -> None:
    """Every ingest error is one the user caused (an input of theirs): the CLI and the dashboard
    say it in one line, never as an internal error (exit 3)."""
    (tmp_path / "g").write_text("hello")
    with pytest.raises(UserError) as e:
        input_kind(tmp_path / "g")
    assert isinstance(e.value, IngestError)
    assert issubclass(UnsupportedSchema, UserError)
