"""The `seamwatch` command line (analyzer/cli/__init__.py): dispatch to the lab, help texts, the
proxy's checks of its arguments before it starts."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzer.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("http://127.0.0.1:18901/mcp", "the proxy forwards every path; drop '/mcp'"),
        ("http://127.0.0.1:18901/?x=1", "the proxy forwards every path; drop '/?x=1'"),
        ("http://127.0.0.1:18901?x=1", "the proxy forwards every path; drop '?x=1'"),
        ("http://127.0.0.1:18901/#top", "the proxy forwards every path; drop '/#top'"),
        ("https://h.example/a/b/", "the proxy forwards every path; drop '/a/b/'"),
        ("http://a b:80", "'a b' in 'http://a b:80' is not a host name"),
    ],
)
def test_an_upstream_that_is_not_an_origin_is_bad_usage_naming_it(
    value: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["proxy", "--upstream", value])
    assert e.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("seamwatch proxy: error: argument --upstream: ")
    assert reason in last and repr(value) in last


def test_an_upstream_password_is_refused_without_being_echoed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["proxy", "--upstream", "http://user:s3cret@127.0.0.1:18901"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert err.splitlines()[-1].endswith(
        "expected scheme://host[:port], got 'http://...@127.0.0.1:18901': drop the user name "
        "and password"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proxy(out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "analyzer.cli", "proxy", "--upstream", "http://127.0.0.1:1"]
    cmd += ["--listen", f"127.0.0.1:{_free_port()}", "--out", str(out)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=45)


@pytest.fixture
def locked_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can create anything in: immutable for root, read-only for others."""
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(locked)]).returncode:
            pytest.skip("root, and this file system cannot make a folder immutable")
        try:
            yield locked
        finally:
            subprocess.run([chattr, "-i", str(locked)], check=True)
    else:
        os.chmod(locked, stat.S_IRUSR | stat.S_IXUSR)
        try:
            yield locked
        finally:
            os.chmod(locked, stat.S_IRWXU)


@pytest.mark.timeout(120)
def test_an_unusable_out_is_one_line_and_exit_2_before_the_proxy_starts(
    tmp_path: Path, locked_dir: Path
) -> None:
    (tmp_path / "file").write_text("")
    cases = {
        tmp_path / "file": f"seamwatch: --out: not a directory: {tmp_path / 'file'}",
        tmp_path / "file" / "cap": f"seamwatch: --out: not a directory: {tmp_path / 'file'}",
        locked_dir: f"seamwatch: --out: cannot create a file in {locked_dir}: ",
        locked_dir
        / "a"
        / "cap": f"seamwatch: --out: cannot create the folder {locked_dir / 'a'}: ",
    }
    for out, line in cases.items():
        done = _proxy(out)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr
    assert list(locked_dir.iterdir()) == []


def _crash_in_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug where no input can reach: the report writer raises."""
    from analyzer.cli import analyze

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("report writer broke")

    monkeypatch.setattr(analyze, "build_report", broken)


def _capture(tmp_path: Path) -> Path:
    """A one-line capture that reads cleanly."""
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"seq":0,"kind":"capture_open","ts_ns":1,"mono_ns":1,"file_index":0,"schema":"1.2",'
        '"run_id":"r","tool_version":"t","mitmproxy_version":"m"}\n'
    )
    return path


def test_an_internal_error_exits_3_with_one_line_and_a_traceback_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _crash_in_report(monkeypatch)
    out = tmp_path / "reports" / "r.json"
    out.parent.mkdir()
    code = main(
        ["analyze", "--no-cache", "--format", "json", "--out", str(out), str(_capture(tmp_path))]
    )
    err = capsys.readouterr().err
    assert code == 3  # not 1: CI must tell a broken tool from a failed check
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("seamwatch: internal error: RuntimeError: report writer broke at ")
    written = list(out.parent.glob("seamwatch-error-*.txt"))
    assert len(written) == 1 and f"traceback in {written[0]}" in err
    assert "Traceback" in written[0].read_text() and "report writer broke" in written[0].read_text()
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o600


def test_debug_prints_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _crash_in_report(monkeypatch)
    assert main(["--debug", "analyze", "--no-cache", str(_capture(tmp_path))]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("; traceback above\n")


def test_the_proxy_warns_on_a_listen_address_that_is_not_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the proxy stops there, exit 2.
    code = main(
        [
            *("proxy", "--upstream", "http://127.0.0.1:1"),
            *("--listen", "192.0.2.1:18080", "--out", str(tmp_path / "cap")),
        ]
    )
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err[0] == (
        "seamwatch: warning: the proxy listens on 192.0.2.1, not loopback: anyone who can reach "
        "this address can send requests through it to http://127.0.0.1:1, and they are recorded"
    )
    assert err[1].startswith("seamwatch: cannot listen on 192.0.2.1:18080")


@pytest.mark.parametrize(("mode", "warned"), [(0o777, True), (0o1777, False), (0o755, False)])
def test_the_proxy_warns_on_an_out_folder_others_can_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int, warned: bool
) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    os.chmod(out, mode)
    with socket.socket() as taken:  # the proxy stops at the port in use: nothing starts
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(
            [
                *("proxy", "--upstream", "http://127.0.0.1:1"),
                *("--listen", f"127.0.0.1:{port}", "--out", str(out)),
            ]
        )
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err[-1].endswith("address in use")
    warning = (
        f"seamwatch: warning: --out {out} is writable by other users: they can add or replace "
        "capture files that analyze will merge with this capture"
    )
    assert (warning in err) is warned


# --- every error the user can cause: exit 2, one line on stderr, no traceback ------------------

SEAMWATCH = Path(sys.executable).parent / "seamwatch"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of inputs and settings each wrong in one way."""
    folder = tmp_path_factory.mktemp("bad")
    files = {
        "empty.jsonl": "",
        "bad.har": "garbage",
        "bad.mitm": "x",
        "unknown.toml": "[detectors.nope]\nx = 1\n",
        "broken.toml": "not toml [",
        "threshold.toml": '[detectors.causal-gap]\nprogress_jump = "big"\n',
        "base.json": '{"a": 1}',
        "base-entry.json": '{"schema": 1, "findings": [{"fingerprint": ""}]}',
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "nothing").mkdir()
    return folder


USER_ERRORS = {
    "an input that does not exist": (["analyze", "gone.jsonl"], "seamwatch: gone.jsonl: no such"),
    "a file with no capture records": (["analyze", "empty.jsonl"], "seamwatch: no capture records"),
    "a HAR that is not one": (["analyze", "bad.har"], "seamwatch: bad.har: not a HAR file"),
    "a dump that is not one": (["analyze", "bad.mitm"], "seamwatch: bad.mitm: not a mitmproxy"),
    "a folder without captures": (["analyze", "nothing"], "seamwatch: nothing: no capture files"),
    "a config naming no detector": (
        ["analyze", "empty.jsonl", "--config", "unknown.toml"], "seamwatch: config unknown.toml:"),
    "a config that is not TOML": (
        ["analyze", "empty.jsonl", "--config", "broken.toml"], "seamwatch: config broken.toml is"),
    "a config threshold that is no number": (
        ["analyze", "empty.jsonl", "--config", "threshold.toml"], "seamwatch: config threshold"),
    "a config that does not exist": (
        ["analyze", "empty.jsonl", "--config", "gone.toml"], "seamwatch: cannot read config"),
    "a baseline of another shape": (
        ["analyze", "empty.jsonl", "--baseline", "base.json"], "seamwatch: baseline base.json:"),
    "a baseline entry without a fingerprint": (
        ["analyze", "empty.jsonl", "--baseline", "base-entry.json"], "seamwatch: baseline "),
    "a baseline that does not exist": (
        ["analyze", "empty.jsonl", "--baseline", "gone.json"], "seamwatch: baseline gone.json:"),
    "an unknown detector id": (["analyze", "empty.jsonl", "--only", "nope"], "seamwatch: --only:"),
    "no detector left": (
        ["analyze", "empty.jsonl", "--only", "causal-gap", "--disable", "causal-gap"],
        "seamwatch: --only and --disable leave no detector"),
    "an unknown severity": (
        ["analyze", "empty.jsonl", "--fail-on", "worst"], "seamwatch: --fail-on"),
    "an unknown format": (
        ["analyze", "empty.jsonl", "--format", "xml"], "seamwatch analyze: error: argument"),
    "an unknown option": (["analyze", "empty.jsonl", "--bogus"], "seamwatch: error: unrecognized"),
    "an unknown command": (["bogus"], "seamwatch: error: argument COMMAND: invalid choice"),
    "no input": (["analyze"], "seamwatch analyze: error: the following arguments are required"),
    "a report that cannot be written": (
        ["analyze", "empty.jsonl", "--out", "gone/r.json"], "seamwatch: cannot write gone/r.json"),
    "a baseline that cannot be written": (
        ["baseline", "write", "empty.jsonl", "--out", "nothing"], "seamwatch: cannot write"),
    "an export target that is no URL": (
        ["export", "empty.jsonl", "--otlp-endpoint", "collector"], "seamwatch: --otlp-endpoint"),
    "a dashboard of an input that does not exist": (
        ["dashboard", "gone.jsonl"], "seamwatch: gone.jsonl: no such"),
    "a proxy upstream that is no origin": (
        ["proxy", "--upstream", "ftp://x"], "seamwatch proxy: error: argument --upstream"),
    "a proxy listen port out of range": (
        ["proxy", "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:99999"],
        "seamwatch proxy: error: argument --listen"),
}  # fmt: skip


@pytest.mark.parametrize(("argv", "said"), USER_ERRORS.values(), ids=USER_ERRORS.keys())
def test_a_user_error_is_one_line_and_exit_2(inputs: Path, argv: list[str], said: str) -> None:
    done = subprocess.run(
        [str(SEAMWATCH), *argv], cwd=inputs, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(said), done.stderr
