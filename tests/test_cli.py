"""The `seamwatch` command line (analyzer/cli.py): dispatch to the lab, help texts."""

from __future__ import annotations

import argparse

import pytest

from analyzer.cli import build_parser, main


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_lab_help_is_the_labs_usage(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["lab", flag])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: seamwatch lab ")
    assert "list" in out and "run" in out


def test_lab_run_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["lab", "run", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: seamwatch lab run ") and "--budget SECONDS" in out


def test_lab_options_before_the_command_reach_the_lab(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lab", "--bogus", "list"]) == 2
    assert capsys.readouterr().err == "seamwatch lab: unrecognized arguments: --bogus\n"


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[name]
    return chosen


@pytest.mark.parametrize("command", ["analyze", "dashboard"])
def test_every_argument_has_help(command: str) -> None:
    missing = [
        action.dest for action in _subcommand(command)._actions if not (action.help or "").strip()
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("command", "option", "words"),
    [
        ("analyze", "--format", ["default table"]),
        ("analyze", "--fail-on", ["default medium", "none"]),
        ("dashboard", "--port", ["default 8501"]),
        ("dashboard", "--address", ["default 127.0.0.1"]),
    ],
)
def test_help_names_the_default(command: str, option: str, words: list[str]) -> None:
    action = next(a for a in _subcommand(command)._actions if option in a.option_strings)
    assert all(word in (action.help or "") for word in words), action.help
    assert str(action.default) in (action.help or "")
