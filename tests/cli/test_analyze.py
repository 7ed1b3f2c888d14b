"""`seamwatch analyze`: exit codes, option parsing and the pipeline (analyzer/cli/analyze.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

import analyzer.analysis
from analyzer import cli
from analyzer.cli import analyze as run
from analyzer.command import UsageError
from analyzer.findings import Severity, empty_findings
from analyzer.ingest.common import UnreadableInput, UnsupportedSchema
from analyzer.schema import EXCHANGES, SESSIONS, STREAMS
from analyzer.timeline.frames import FRAMES
from tests.support.records import Capture
from tests.support.report_sample import ROWS, make_report

T0_NS = 1_750_000_000_000_000_000

# --- the pure part -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [
        (Severity.INFO, 1),
        (Severity.LOW, 1),
        (Severity.MEDIUM, 1),
        (Severity.HIGH, 1),
        (None, 0),
    ],
)
def test_exit_code_with_findings_of_every_level(fail_on: Severity | None, code: int) -> None:
    assert run.exit_code(make_report().findings, fail_on) == code


@pytest.mark.parametrize(
    ("levels", "fail_on", "code"),
    [
        (["info", "low"], Severity.MEDIUM, 0),
        (["info", "low", "medium"], Severity.MEDIUM, 1),
        (["medium"], Severity.HIGH, 0),
        (["info"], Severity.INFO, 1),
        (["high"], None, 0),
    ],
)
def test_exit_code_threshold(levels: list[str], fail_on: Severity | None, code: int) -> None:
    rows = [dict(ROWS[0], severity=level, event_ids=[level]) for level in levels]
    assert run.exit_code(make_report(rows).findings, fail_on) == code


def test_no_findings_is_exit_0() -> None:
    assert run.exit_code(empty_findings(), Severity.INFO) == 0


@pytest.mark.parametrize(
    ("text", "want"),
    [("medium", Severity.MEDIUM), ("HIGH", Severity.HIGH), ("none", None), ("None", None)],
)
def test_parse_fail_on(text: str, want: Severity | None) -> None:
    assert run.parse_fail_on(text) is want


def test_parse_fail_on_rejects_other_words() -> None:
    with pytest.raises(UsageError, match=r"--fail-on: unknown severity 'critical'.*or none"):
        run.parse_fail_on("critical")


# --- the command -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    path: str
    records: int = 5
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def frame(schema: pl.Schema, *rows: dict[str, object]) -> pl.LazyFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).lazy()


def fake_timeline(path: Path) -> Any:
    """A timeline with one stream left open at capture end (an info capture-health finding)."""
    flow = {
        "session_id": "mcp:s1",
        "stream_id": "f1",
        "flow_id": "f1",
        "ts": T0_NS,
        "seq": 1,
        "input": 0,
        "end_how": "open_at_shutdown",
    }
    empty = {f.name: frame(f.schema) for f in FRAMES if f.on_timeline}
    return SimpleNamespace(
        **empty
        | dict(
            inputs=(Input(str(path)),),
            exchanges=frame(EXCHANGES, flow),
            sessions=frame(SESSIONS, {"session_id": "mcp:s1"}),
            streams=frame(STREAMS, {"session_id": "mcp:s1", "stream_id": "f1"}),
        )
    )


@pytest.fixture
def load_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace reading inputs with `fake_timeline`; the list records each call's arguments."""
    calls: list[dict[str, Any]] = []

    def load_timeline(paths: list[Path], **options: Any) -> Any:
        assert options["spill_dir"].is_dir()  # made for this analysis, there while it runs
        calls.append({"paths": paths, **options})
        return fake_timeline(paths[0])

    monkeypatch.setattr(run, "load_timeline", load_timeline)
    return calls


@pytest.fixture
def capture(tmp_path: Path, load_calls: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cap.jsonl"
    path.write_text("", encoding="utf-8")
    return path


def analyze(*argv: str) -> int:
    return cli.main(["analyze", *argv])


def test_json_to_stdout_and_exit_0_below_fail_on(
    capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert analyze(str(capture), "--format", "json") == 0
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert [f["detector"] for f in got["findings"]] == ["capture-health"]
    assert got["summary"]["sessions"] == 1 and got["summary"]["streams"] == 1
    assert got["inputs"] == [{"path": str(capture), "records": 5, "skipped": 0, "warnings": []}]
    assert err == ""  # no progress when stderr is not a terminal


def test_options_reach_the_reader(capture: Path, load_calls: list[dict[str, Any]]) -> None:
    analyze(str(capture), "--replica-header", "X-Served-By", "--client-header", "X-C", "--no-cache")
    (call,) = load_calls
    assert callable(call.pop("on_progress")) and callable(call.pop("on_step"))
    spill = call.pop("spill_dir")  # a private folder for large frames, gone with the analysis
    assert isinstance(spill, Path) and not spill.exists()
    assert call == {
        "paths": [capture],
        "replica_header": "X-Served-By",
        "client_header": "X-C",
        "use_cache": False,
    }


def test_fail_on_info_exits_1(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analyze(str(capture), "--fail-on", "info") == 1
    assert "fail-on info: FAIL" in capsys.readouterr().out


def test_only_and_disable(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analyze(str(capture), "--fail-on", "info", "--disable", "capture-health") == 0
    assert analyze(str(capture), "--fail-on", "info", "--only", "capture-health") == 1


@pytest.mark.parametrize("fmt", ["table", "json", "junit", "sarif"])
def test_out_file_same_bytes_twice(capture: Path, tmp_path: Path, fmt: str) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    assert analyze(str(capture), "--format", fmt, "--out", str(first)) == 0
    assert analyze(str(capture), "--format", fmt, "--out", str(second)) == 0
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fail-on", "critical"], "--fail-on: unknown severity"),
        (["--only", "nope"], "--only: unknown detector(s) nope"),
        (["--disable", "capture-health,nope"], "--disable: unknown detector(s) nope"),
        (["--only", ""], "leave no detector to run"),
        (["--only", "causal-gap", "--disable", "causal-gap"], "leave no detector to run"),
        (["--only", "analysis-error"], "leave no detector to run"),
        (["--config", "/nonexistent/seamwatch.toml"], "cannot read config"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    capture: Path,
    load_calls: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert analyze(str(capture), *argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("seamwatch: ") and message in err
    assert err.count("\n") == 1
    assert load_calls == []  # nothing was read


def test_bad_config_key_exits_2(
    capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "seamwatch.toml"
    config.write_text("[detectors.capture-health]\nwindow_s = 3\n", encoding="utf-8")
    assert analyze(str(capture), "--config", str(config)) == 2
    assert "unknown threshold 'window_s' for detector capture-health" in capsys.readouterr().err


def test_missing_input_exits_2(
    capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert analyze(str(capture), str(tmp_path / "absent.jsonl")) == 2
    assert "absent.jsonl: no such file or directory" in capsys.readouterr().err


def test_unwritable_out_exits_2(
    capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert analyze(str(capture), "--out", str(tmp_path / "no" / "such" / "dir" / "r.json")) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("out", "reason"),
    [
        ("missing/r.json", "missing: no such directory"),
        ("notadir/r.json", "notadir: not a directory"),
        ("notadir", "it is a directory"),
    ],
)
def test_out_is_checked_before_any_input_is_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    out: str,
    reason: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notadir").write_text("x\n", encoding="utf-8")
    if out == "notadir":
        (tmp_path / "notadir").unlink()
        (tmp_path / "notadir").mkdir()
    (tmp_path / "empty").mkdir()  # the real reader refuses it: "no capture files"
    assert analyze("empty", "--out", out) == 2
    assert capsys.readouterr().err == f"seamwatch: cannot write {out}: {reason}\n"


@pytest.mark.parametrize(
    "error",
    [
        UnsupportedSchema("cap.jsonl: capture schema 9.0 is not supported\nupgrade seamwatch"),
        UnreadableInput("cap.jsonl: no capture files"),
        PermissionError(13, "Permission denied"),
    ],
)
def test_unreadable_input_from_the_reader_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
) -> None:
    path = tmp_path / "cap.jsonl"
    path.write_text("", encoding="utf-8")

    def read_timeline(paths: list[Path], **options: Any) -> Any:
        raise error

    monkeypatch.setattr(analyzer.analysis, "read_timeline", read_timeline)
    assert analyze(str(path)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("seamwatch: ") and err.count("\n") == 1


# --- through the real reader and timeline ------------------------------------------------------


def write_torn_capture(path: Path) -> Path:
    """A capture whose GET stream is open at shutdown and whose last line is torn."""
    from tests.support.records import Capture, event, req, res, sse

    c = Capture().open()
    init = c.request(body=req("initialize", 1, protocolVersion="2025-06-18", capabilities={}))
    c.response(init, body=res(1, protocolVersion="2025-06-18"), headers={"mcp-session-id": "s1"})
    get = c.request("GET", headers={"mcp-session-id": "s1", "accept": "text/event-stream"})
    c.response(get, sse=True)
    c.chunk(get, sse(event(id="1")), n=0)
    c.end(get, "open_at_shutdown")
    c.write(path)
    with path.open("ab") as f:
        f.write(b'{"kind":"chunk","se')
    return path


def test_a_torn_capture_is_findings_not_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_torn_capture(tmp_path / "cap.jsonl")
    assert analyze(str(path), "--format", "json") == 0  # low and info only
    first = capsys.readouterr().out
    got = json.loads(first)
    assert got["inputs"][0]["skipped"] == 1
    assert [(f["severity"], f["session"]) for f in got["findings"]] == [
        ("low", None),
        ("info", "mcp:s1"),
    ]
    assert analyze(str(path), "--format", "json") == 0  # now from the Parquet cache
    assert capsys.readouterr().out == first
    assert analyze(str(path), "--fail-on", "low") == 1


def test_progress_bar_on_a_terminal_and_nothing_off_it(tmp_path: Path) -> None:
    """The real command with stderr on a pseudo-terminal draws a byte bar for the parse (the
    steps after it may pass between two refreshes); with stderr on a pipe it writes nothing
    there, and stdout is the same."""
    import os
    import pty
    import subprocess
    import sys

    path = write_torn_capture(tmp_path / "cap.jsonl")
    argv = [sys.executable, "-m", "analyzer.cli", "analyze", str(path), "--format", "json"]
    argv += ["--no-cache", "--fail-on", "none"]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    primary, secondary = pty.openpty()
    try:
        tty_run = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=secondary, env=env, timeout=60, check=True
        )
        os.close(secondary)
        drawn = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child's side is closed and everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(primary)
    text = drawn.decode("utf-8", "replace")
    assert f"parsing {path}" in text
    assert "kB" in text  # bytes done / total
    piped = subprocess.run(argv, capture_output=True, env=env, timeout=60, check=True)
    assert piped.stderr == b""
    assert piped.stdout == tty_run.stdout


def test_analyze_names_the_files_it_merges_from_a_folder_others_can_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import shutil

    folder = tmp_path / "shared"
    folder.mkdir()
    source = Path(__file__).parents[1] / "fixtures" / "dashboard" / "round-robin-replicas"
    (capture,) = (source / "capture").glob("*.jsonl")
    shutil.copy(capture, folder / capture.name)
    (folder / "planted.jsonl").write_bytes(capture.read_bytes())
    os.chmod(folder, 0o777)
    analyze(str(folder), "--no-cache", "--format", "json")
    err = capsys.readouterr().err
    assert err == (
        f"seamwatch: warning: {folder} is writable by other users; merging from it: "
        f"{capture.name}, planted.jsonl\n"
    )
    os.chmod(folder, 0o755)
    analyze(str(folder), "--no-cache", "--format", "json")
    assert capsys.readouterr().err == ""


def test_the_default_engine_loads_neither_spark_nor_pyarrow(tmp_path: Path) -> None:
    """Spark's modules (and pyarrow with them) load only for `--engine spark`: every analysis on
    the default engine would otherwise pay their import at its start."""
    capture = Capture().open().close().write(tmp_path / "capture.jsonl")
    probe = (
        "import sys\n"
        "from analyzer.cli import main\n"
        "try:\n"
        f"    main(['analyze', {str(capture)!r}, '--format', 'json', '--fail-on', 'none',"
        f" '--no-cache', '--out', {str(tmp_path / 'report.json')!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('analyzer.spark', 'pyarrow', 'pyspark')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
    assert (tmp_path / "report.json").exists()
