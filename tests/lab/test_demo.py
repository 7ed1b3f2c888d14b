"""`seamwatch demo`: run scenarios, analyze, print one verdict row per scenario, exit accordingly.

The whole lab already runs in test_expectations.py; here `main()` analyzes two real scenarios
(the session's runs of them), and the failure paths run on hand-built captures in place of the
lab (fast).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lab.demo as demo
from analyzer.cli import main as seamwatch
from lab.framework import LabContext, LabError, Scenario
from lab.scenarios import by_name
from tests.support.lab_capture import LabRuns
from tests.support.records import Capture, req, res


def _scenario(tmp_path: Path, name: str, expected: dict[str, Any]) -> Scenario:
    path = tmp_path / f"{name}.expected.json"
    path.write_text(json.dumps(expected), encoding="utf-8")

    def run(ctx: LabContext) -> None:
        raise AssertionError("replaced by the fake lab")

    return Scenario(name=name, description="test", run=run, expected_path=path)


def _retry_capture() -> Capture:
    """A 2026 side-effecting call re-issued under a new id after its stream broke."""
    headers = {"MCP-Protocol-Version": "2026-07-28"}
    c = Capture().open()
    listing = c.request(body=req("tools/list", 0), headers=headers)
    c.response(listing, body=res(0, tools=[{"name": "charge"}]))  # side-effecting
    for rid, broken in ((1, True), (2, False)):
        f = c.request(
            body=req("tools/call", rid, name="charge", arguments={"n": 1}), headers=headers
        )
        if broken:
            c.response(f, sse=True)
            c.end(f, "client_closed")
        else:
            c.response(f, body=res(rid, content=[]))
    return c.close()


def _fake_lab(captures: dict[str, Capture | None]) -> Callable[[Scenario, Path], Path]:
    """A stand-in for run_scenario: writes a hand-built capture, or fails like the lab does."""

    def run(scenario: Scenario, out: Path) -> Path:
        capture = captures[scenario.name]
        if capture is None:
            raise LabError(f"{scenario.name}: server exited with 1 before listening on [::1]")
        directory = out / scenario.name
        (directory / "capture").mkdir(parents=True)
        capture.write(directory / "capture" / "capture-1.jsonl")
        return directory

    return run


def _main(out: Path, scenarios: list[Scenario]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = demo.main(out, scenarios=scenarios, stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.mark.timeout(180)
def test_real_scenarios_give_their_verdicts(
    tmp_path: Path, lab_runs: LabRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = [by_name("clean-modern"), by_name("modern-retry")]
    assert all(s is not None for s in scenarios)

    def session_run(scenario: Scenario, out: Path) -> Path:
        """The session's real run of the scenario, copied where the demo would have run it."""
        return Path(shutil.copytree(lab_runs.directory(scenario.name), out / scenario.name))

    monkeypatch.setattr(demo, "run_scenario", session_run)
    code, out, log = _main(tmp_path / "demo", [s for s in scenarios if s is not None])
    assert code == 0, out + log
    rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 2
    assert rows[0].startswith("| clean-modern") and "| nothing" in rows[0]
    assert rows[1].startswith("| modern-retry") and "repeated-tool-call (high)" in rows[1]
    assert all(row.rstrip(" |").endswith("ok") for row in rows)
    assert f"seamwatch dashboard {tmp_path / 'demo'}" in out
    assert (tmp_path / "demo" / "modern-retry" / "expected.json").is_file()
    assert "[2/2] modern-retry ... ok" in log


def test_a_mismatch_exits_1_and_says_what_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _scenario(tmp_path, "retry", {"required": ["repeated-tool-call"]})
    wrong = _scenario(tmp_path, "claims-clean", {})
    lab = _fake_lab({"retry": _retry_capture(), "claims-clean": _retry_capture()})
    monkeypatch.setattr(demo, "run_scenario", lab)
    code, out, _log = _main(tmp_path / "out", [good, wrong])
    assert code == 1
    (retry,) = [line for line in out.splitlines() if line.startswith("| retry")]
    (clean,) = [line for line in out.splitlines() if line.startswith("| claims-clean")]
    assert "repeated-tool-call (high)" in retry and retry.rstrip(" |").endswith("ok")
    assert "| nothing" in clean and "FAIL: unexpected repeated-tool-call (high)" in clean


def test_a_scenario_that_cannot_run_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _scenario(tmp_path, "broken", {})
    monkeypatch.setattr(demo, "run_scenario", _fake_lab({"broken": None}))
    code, out, log = _main(tmp_path / "out", [broken])
    assert code == 2
    assert "ERROR: broken: server exited with 1 before listening on [::1]" in out
    assert "[1/1] broken ... error" in log


@pytest.mark.parametrize("below", ["", "sub"])
def test_out_that_is_a_file_is_one_line_before_any_scenario(
    below: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "notadir"
    blocker.write_text("x\n")
    out = blocker / below if below else blocker
    assert seamwatch(["demo", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no scenario ran, no table
    assert captured.err == f"seamwatch demo: --out {out}: not a directory\n"


def test_missing_typescript_sdk_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_npm() -> None:
        raise LabError("npm is not on PATH")

    monkeypatch.setattr(demo.ts, "installed", lambda: False)
    monkeypatch.setattr(demo.ts, "ensure_installed", no_npm)
    monkeypatch.setattr(demo, "run_scenario", _fake_lab({"retry": _retry_capture()}))
    retry = _scenario(tmp_path, "retry", {"required": ["repeated-tool-call"]})
    code, _out, log = _main(tmp_path / "out", [retry])
    assert code == 0
    assert "npm is not on PATH" in log and "npm ci --prefix lab/ts --no-audit --no-fund" in log


def test_cli_hands_out_dir_to_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path | None] = []

    def fake_main(out: Path | None) -> int:
        seen.append(out)
        return 3

    monkeypatch.setattr(demo, "main", fake_main)
    assert seamwatch(["demo", "--out", "somewhere"]) == 3
    assert seamwatch(["demo"]) == 3
    assert seen == [Path("somewhere"), None]


def test_default_out_is_the_git_ignored_demo_out() -> None:
    root = Path(__file__).resolve().parents[2]
    assert Path("demo-out") == demo.DEFAULT_OUT
    assert "/demo-out/" in (root / ".gitignore").read_text(encoding="utf-8").splitlines()
