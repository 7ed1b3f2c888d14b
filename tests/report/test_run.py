"""The report built from a timeline and written in a format (analyzer/report/run.py; the
command around it: tests/cli/test_analyze.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.command import UsageError
from analyzer.findings import empty_findings
from analyzer.report import Report, run
from tests.support.records import Capture, req, res, timeline_of


@pytest.mark.parametrize(
    ("origins", "named"),
    [
        (("http://127.0.0.1:9001", "http://127.0.0.1:9002"), True),
        (("http://127.0.0.1:9001", "http://127.0.0.1:9001"), False),
    ],
)
def test_the_report_knows_each_sessions_origin_only_where_there_are_several(
    origins: tuple[str, str], named: bool
) -> None:
    c = Capture()
    for origin in origins:
        f = c.request(body=req("initialize", 0, protocolVersion="2025-06-18"), origin=origin)
        c.response(f, body=res(0), headers={"Mcp-Session-Id": "1"})
    report = run.build_report(timeline_of(c), empty_findings(), [], fail_on=None)
    expected = {f"mcp:1@{o}": o for o in origins} if named else {}
    assert (report.sessions, dict(report.origins)) == (len(expected) or 1, expected)


def test_write_report_writes_the_format_to_the_file(report: Report, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run.write_report(report, "json", str(out))
    assert json.loads(out.read_text(encoding="utf-8"))["schema"] == 1


def test_write_report_to_a_folder_is_a_usage_error(report: Report, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot write .*: Is a directory$"):
        run.write_report(report, "json", str(tmp_path))


def test_write_text_writes_the_text_as_given(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    run.write_text('{"a": 1}\n', str(out))
    assert out.read_bytes() == b'{"a": 1}\n'


def test_text_out_writes_the_pieces_once_opened(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    text = run.TextOut(str(out))
    assert not out.exists()  # nothing to write yet: a run that fails here leaves no file
    for piece in ('{"a":', "[1,", "2]}\n"):
        text.write(piece)
    text.close()
    assert out.read_bytes() == b'{"a":[1,2]}\n'


def test_text_out_of_nothing_is_an_empty_file(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    run.TextOut(str(out)).close()
    assert out.read_bytes() == b""


def test_text_out_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    text = run.TextOut(None)
    text.write("one ")
    text.write("two\n")
    text.close()
    assert capsys.readouterr().out == "one two\n"


def test_text_out_to_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot write .*: Is a directory$"):
        run.TextOut(str(tmp_path)).write("x")
