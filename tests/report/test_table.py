"""The table report (analyzer/report/table.py)."""

from __future__ import annotations

import dataclasses
import io

from analyzer.findings import Severity
from analyzer.report import Report
from analyzer.report import table as table_report
from tests.support.report_sample import ROWS, make_report


def test_plain_table_lists_findings_worst_first(report: Report) -> None:
    text = table_report.render(report)
    lines = text.splitlines()
    assert "\x1b[" not in text, "no colour codes when not a terminal"
    assert text.isascii()  # the sample's titles are ASCII: so must be everything else
    header = next(line for line in lines if "severity" in line)
    for column in ("severity", "detector", "session", "title"):
        assert column in header
    rows = [line for line in lines if line.startswith("| ") and "severity" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["HIGH", "MEDIUM", "LOW", "INFO"]
    assert "event id 17 issued twice with different payloads" in rows[0]
    assert "mcp:7f3c" in rows[0]
    assert rows[3].split("|")[3].strip() == "-"  # no session
    assert all(len(line) <= table_report.PLAIN_WIDTH for line in lines[:-1])


def test_a_title_keeps_its_characters_and_the_borders_stay_ascii() -> None:
    title = "Ünïcödé title"
    text = table_report.render(make_report([{**ROWS[0], "title": title}]))
    assert title in text
    assert text.replace(title, "").isascii()


def test_summary_line(report: Report) -> None:
    last = table_report.render(report).splitlines()[-1]
    assert last == (
        "4 findings (1 high, 1 medium, 1 low, 1 info) in 2 sessions, 3 streams, "
        "1 resumption, 0 tool calls; fail-on medium: FAIL (2 at or above)"
    )
    assert table_report.summary_line(make_report(fail_on=None)).endswith("fail-on none: pass")
    assert table_report.summary_line(make_report(fail_on=Severity.HIGH)).endswith(
        "fail-on high: FAIL (1 at or above)"
    )


def test_no_findings(empty_report: Report) -> None:
    text = table_report.render(empty_report)
    assert text.splitlines()[0] == "No findings."
    assert text.splitlines()[-1].endswith("fail-on medium: pass")


def test_same_input_same_bytes() -> None:
    assert table_report.render(make_report()) == table_report.render(
        make_report(list(reversed(ROWS)))
    )


def test_terminal_output_is_coloured(report: Report) -> None:
    out = io.StringIO()
    table_report.write(report, out, terminal=True)
    assert "\x1b[" in out.getvalue()


def test_a_stream_that_is_not_a_tty_gets_the_plain_table(report: Report) -> None:
    out = io.StringIO()
    table_report.write(report, out)
    assert out.getvalue() == table_report.render(report)


def test_server_text_cannot_drive_the_terminal() -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07e2 \u202egnp.exe\r\x9b31m"
    row = {**ROWS[0], "session": "mcp:\x1b[31mred", "title": f"event id {hostile} issued twice"}
    report = make_report([row])
    plain = table_report.render(report)
    out = io.StringIO()
    table_report.write(report, out, terminal=True)
    for text in (plain, out.getvalue()):
        for planted in ("\x1b[2J", "\x1b]0;", "\x07", "\x1b[31mred", "\u202e", "\r", "\x9b"):
            assert planted not in text
        assert "pwned" in text  # shown, as inert text


def test_several_origins_are_named_with_their_sessions(report: Report) -> None:
    origins = {"mcp:7f3c": "https://a.test:443", "legacy:abc": "http://127.0.0.1:9002"}
    last = table_report.render(dataclasses.replace(report, origins=origins)).splitlines()[-1]
    assert last == (
        "4 findings (1 high, 1 medium, 1 low, 1 info) in 2 sessions, 3 streams, "
        "1 resumption, 0 tool calls; 2 origins: http://127.0.0.1:9002 (1 session), "
        "https://a.test:443 (1 session); fail-on medium: FAIL (2 at or above)"
    )
