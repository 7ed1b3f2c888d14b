"""The lab framework: processes started, waited for and stopped by pid; budgets; the registry."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

import pytest

import lab.scenarios
from analyzer.scratch import process_alive
from lab import cli
from lab.framework import (
    Expected,
    LabContext,
    LabError,
    Scenario,
    load_lab_record,
    prepare_out_dir,
    python_argv,
    run_scenario,
)
from lab.scenarios import SCENARIOS, by_name

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def expected_file(tmp_path: Path) -> Path:
    path = tmp_path / "x.expected.json"
    path.write_text('{"required": ["stale-cursor"], "evidence": {"event_ids": ["6"]}}\n')
    return path


def _web_server(ctx: LabContext) -> int:
    port = ctx.free_port()
    argv = python_argv("http.server", str(port), "--bind", "127.0.0.1")
    process = ctx.start_process(argv, name="web", port=port)
    ctx.note("pid", process.pid)
    return port


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        ({"required": [], "any_of": [], "allowed": [], "evidence": {}}, True),
        ({"required": ["x"], "any_of": [["a", "b"]], "evidence": {"request_ids": ["3"]}}, True),
        ({"required": "stale-cursor"}, False),
        ({"required": [], "findings": []}, False),
        ({"any_of": ["a"]}, False),
        ({"evidence": {"event_ids": [6]}}, False),
        ({"evidence": {"cursors": ["6"]}}, False),
        ([], False),
    ],
)
def test_expected_is_validated(data: object, ok: bool) -> None:
    if ok:
        assert Expected.from_json(data).to_json()["required"] == data["required"]  # type: ignore[index]
    else:
        with pytest.raises(LabError):
            Expected.from_json(data)


def test_run_scenario_records_notes_copies_expected_and_stops_processes(
    tmp_path: Path, expected_file: Path
) -> None:
    def run(ctx: LabContext) -> None:
        port = _web_server(ctx)
        ctx.note("upstream", ctx.start_proxy(f"http://127.0.0.1:{port}"))

    scenario = Scenario("fw-ok", "a web server", run, expected_file)
    directory = run_scenario(scenario, tmp_path / "out", direct=True)

    assert directory == tmp_path / "out" / "fw-ok"
    assert json.loads((directory / "expected.json").read_text()) == json.loads(
        expected_file.read_text()
    )
    record = load_lab_record(directory)
    notes = record["notes"]
    assert isinstance(notes, dict)
    assert notes["upstream"].startswith("http://127.0.0.1:")  # direct: the upstream itself
    assert record["processes"] == [
        {
            "name": "web",
            "pid": notes["pid"],
            "argv": record["processes"][0]["argv"],  # type: ignore[index]
            "returncode": record["processes"][0]["returncode"],  # type: ignore[index]
            "stopped": "sigterm",
            "ready_s": record["processes"][0]["ready_s"],  # type: ignore[index]
        }
    ]
    assert not process_alive(notes["pid"])
    assert (directory / "logs" / "web.log").exists()


def test_a_second_run_replaces_the_lab_directory_but_not_a_foreign_one(
    tmp_path: Path, expected_file: Path
) -> None:
    def run(ctx: LabContext) -> None:
        ctx.note("run", True)

    scenario = Scenario("fw-again", "twice", run, expected_file)
    first = run_scenario(scenario, tmp_path, direct=True)
    (first / "stale.txt").write_text("left from the first run")
    second = run_scenario(scenario, tmp_path, direct=True)
    assert second == first and not (second / "stale.txt").exists()

    foreign = Scenario("fw-foreign", "x", run, expected_file)
    (tmp_path / "fw-foreign").mkdir()
    with pytest.raises(LabError, match="not made by the lab"):
        run_scenario(foreign, tmp_path, direct=True)


def test_a_process_that_dies_before_listening_is_a_clear_error(
    tmp_path: Path, expected_file: Path
) -> None:
    def run(ctx: LabContext) -> None:
        code = "import sys; sys.stderr.write('ValueError: no config\\n'); sys.exit(3)"
        ctx.start_process([sys.executable, "-c", code], name="broken", port=ctx.free_port())

    with pytest.raises(LabError, match=r"broken exited with 3 .*ValueError: no config"):
        run_scenario(Scenario("fw-dies", "x", run, expected_file), tmp_path, direct=True)


def test_a_process_that_never_listens_times_out(tmp_path: Path, expected_file: Path) -> None:
    def run(ctx: LabContext) -> None:
        argv = [sys.executable, "-c", "import time; time.sleep(30)"]
        ctx.start_process(argv, name="mute", port=ctx.free_port(), ready_timeout=0.5)

    started = time.monotonic()
    with pytest.raises(LabError, match="mute did not listen"):
        run_scenario(Scenario("fw-mute", "x", run, expected_file), tmp_path, direct=True)
    assert time.monotonic() - started < 10
    notes = load_lab_record(tmp_path / "fw-mute")["processes"]
    assert isinstance(notes, list) and notes[0]["stopped"] == "sigterm"


def test_the_budget_is_enforced_and_processes_are_stopped(
    tmp_path: Path, expected_file: Path
) -> None:
    def run(ctx: LabContext) -> None:
        _web_server(ctx)
        time.sleep(30)

    started = time.monotonic()
    with pytest.raises(LabError, match="exceeded its 1 s budget"):
        run_scenario(Scenario("fw-slow", "x", run, expected_file), tmp_path, budget_s=1.0)
    assert time.monotonic() - started < 10
    record = load_lab_record(tmp_path / "fw-slow")
    pid = record["notes"]["pid"]  # type: ignore[index]
    assert not process_alive(pid)


def test_a_failing_client_becomes_a_lab_error(tmp_path: Path, expected_file: Path) -> None:
    def run(ctx: LabContext) -> None:
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(LabError, match="ConnectionRefusedError: nobody home"):
        run_scenario(Scenario("fw-fails", "x", run, expected_file), tmp_path, direct=True)


def test_without_direct_a_scenario_must_leave_a_capture(
    tmp_path: Path, expected_file: Path
) -> None:
    def run(ctx: LabContext) -> None:
        ctx.note("proxy", "forgotten")

    with pytest.raises(LabError, match="wrote no capture"):
        run_scenario(Scenario("fw-nocapture", "x", run, expected_file), tmp_path)


def test_run_async_is_bounded_by_the_budget(tmp_path: Path, expected_file: Path) -> None:
    async def answer() -> int:
        return 42

    def run(ctx: LabContext) -> None:
        ctx.note("answer", ctx.run_async(answer))

    directory = run_scenario(Scenario("fw-async", "x", run, expected_file), tmp_path, direct=True)
    notes = load_lab_record(directory)["notes"]
    assert isinstance(notes, dict) and notes["answer"] == 42


def test_every_scenario_module_is_registered_with_valid_expectations() -> None:
    modules = [
        importlib.import_module(f"lab.scenarios.{name}")
        for _, name, _ in pkgutil.iter_modules(lab.scenarios.__path__)
        if not name.startswith("_")
    ]
    assert sorted(module.SCENARIO.name for module in modules) == sorted(s.name for s in SCENARIOS)
    for module in modules:
        scenario = module.SCENARIO
        assert scenario in SCENARIOS, f"{module.__name__} is not listed in SCENARIOS"
        assert scenario.name.replace("-", "_") == module.__name__.rsplit(".", 1)[-1]
        assert scenario.expected_path.exists()
        expected = scenario.expected  # validates
        clean = scenario.name.startswith("clean-")
        assert clean == (not expected.required and not expected.any_of), scenario.name
        assert by_name(scenario.name) is scenario


def test_cli_lists_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [s.name for s in SCENARIOS]


@pytest.mark.parametrize(
    "argv",
    [["run", "no-such-scenario", "--out", "x"], ["run", "--out", "x"], ["frobnicate"]],
)
def test_cli_bad_usage_exits_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("seamwatch lab: ") and err.count("\n") == 1


@pytest.mark.parametrize("budget", ["-1", "0", "nan", "inf"])
def test_cli_rejects_a_budget_that_is_not_a_positive_number(
    budget: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli.main(["run", "clean-resume", "--out", str(out), "--budget", budget]) == 2
    err = capsys.readouterr().err
    assert err.startswith("seamwatch lab: argument --budget: ") and err.count("\n") == 1
    assert repr(budget) in err
    assert not out.exists()  # refused while parsing: no scenario started


@pytest.mark.parametrize("which", [["clean-resume"], ["--all"]])
@pytest.mark.parametrize("below", ["", "sub"])
def test_cli_out_that_is_a_file_is_one_line_before_any_scenario(
    which: list[str], below: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "notadir"
    blocker.write_text("x\n")
    out = blocker / below if below else blocker
    assert cli.main(["run", *which, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no scenario ran
    assert captured.err == f"seamwatch lab: --out {out}: not a directory\n"


def test_prepare_out_dir_makes_missing_folders(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    prepare_out_dir(out)
    assert out.is_dir()
    prepare_out_dir(out)  # and accepts one that exists


def test_run_scenario_into_a_file_is_a_lab_error(tmp_path: Path, expected_file: Path) -> None:
    blocker = tmp_path / "notadir"
    blocker.write_text("x\n")

    def run(ctx: LabContext) -> None:
        raise AssertionError("must not start")

    with pytest.raises(LabError, match="notadir"):
        run_scenario(Scenario("fw-file", "x", run, expected_file), blocker)
