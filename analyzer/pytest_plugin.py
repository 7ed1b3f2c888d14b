"""The pytest plugin: `seamwatch proxy` around a staging suite, the analysis at session end.

Registered through the `pytest11` entry point, so installing seamwatch is enough. Nothing
happens without `--seamwatch-upstream` (or `seamwatch_upstream` in the ini file): the plugin
then only declares its options and the `seamwatch_proxy` fixture.

With an upstream, the session fixture `seamwatch_proxy` starts the proxy before the first test
that asks for it and yields its base URL; every test's start and end are recorded, so each
finding is attributed to the test during which its first evidence arrived. At session end the
capture is analyzed, findings at or above `--seamwatch-fail-on` (not in the baseline) fail the
run, and the reports asked for are written beside the capture.

Under pytest-xdist each worker starts its own proxy into `capture-<worker>/` and writes its
tests' times beside it; the controller analyzes every worker's capture as one input set.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from analyzer.pytest_proxy import ProxyFailed, ProxyProcess, launch

if TYPE_CHECKING:
    import polars as pl

    from analyzer.baseline import BaselineOutcome
    from analyzer.findings import Severity
    from analyzer.report import Report

__all__ = ["Settings", "TestSpan", "attribute"]

PLUGIN_NAME: Final = "seamwatch-session"
DEFAULT_OUT: Final = "seamwatch-out"
#: Report format -> file name in the out folder.
REPORT_FILES: Final = {
    "json": "seamwatch.json",
    "junit": "seamwatch.xml",
    "sarif": "seamwatch.sarif",
    "table": "seamwatch.txt",
}
#: (option, ini key, help) of every setting; the ini key is the option's dest.
_OPTIONS: Final = (
    ("--seamwatch-upstream", "URL", "start `seamwatch proxy` in front of this MCP server"),
    ("--seamwatch-out", "DIR", f"capture and report folder (default {DEFAULT_OUT})"),
    (
        "--seamwatch-fail-on",
        "SEVERITY|none",
        "fail the run on findings at or above this severity (default medium; none: never)",
    ),
    ("--seamwatch-baseline", "FILE", "findings recorded here are reported, never failed on"),
    ("--seamwatch-replica-header", "NAME", "response header naming the replica"),
    (
        "--seamwatch-report",
        "FORMATS",
        "comma-separated report formats written to the out folder: json,junit,sarif,table",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("seamwatch", "seamwatch: record and analyze MCP traffic")
    for option, metavar, text in _OPTIONS:
        dest = option.removeprefix("--").replace("-", "_")
        group.addoption(option, dest=dest, metavar=metavar, default=None, help=text)
        parser.addini(dest, f"seamwatch: {text} (as {option})", type="string", default="")


@dataclass(frozen=True)
class Settings:
    """The plugin's options after the command line and the ini file were merged."""

    upstream: str
    out: Path
    fail_on: Severity | None
    baseline: Path | None
    replica_header: str | None
    reports: tuple[str, ...]

    @classmethod
    def read(cls, config: pytest.Config) -> Settings | None:
        """The settings of this run; None without an upstream (the plugin stays inert)."""
        value = _setting(config, "seamwatch_upstream")
        if not value:
            return None
        # Only now: a suite without an upstream never pays for the analyzer's imports.
        from analyzer.findings import Severity

        fail_on_text = _setting(config, "seamwatch_fail_on") or "medium"
        fail_on: Severity | None = None
        if fail_on_text.strip().lower() != "none":
            try:
                fail_on = Severity.parse(fail_on_text)
            except ValueError as e:
                raise pytest.UsageError(f"--seamwatch-fail-on: {e}; or none") from None
        reports = tuple(
            part.strip().lower()
            for part in (_setting(config, "seamwatch_report") or "").split(",")
            if part.strip()
        )
        unknown = sorted(set(reports) - set(REPORT_FILES))
        if unknown:
            choices = ",".join(REPORT_FILES)
            raise pytest.UsageError(f"--seamwatch-report: unknown {unknown} (from {choices})")
        baseline = _setting(config, "seamwatch_baseline")
        if baseline and not Path(baseline).is_file():
            raise pytest.UsageError(f"--seamwatch-baseline: {baseline}: no such file")
        root = Path(str(config.rootpath))
        return cls(
            upstream=value,
            out=root / (_setting(config, "seamwatch_out") or DEFAULT_OUT),
            fail_on=fail_on,
            # Absolute now: a test may change the working folder before the session ends.
            baseline=Path(baseline).absolute() if baseline else None,
            replica_header=_setting(config, "seamwatch_replica_header") or None,
            reports=tuple(dict.fromkeys(reports)),
        )


def _setting(config: pytest.Config, dest: str) -> str:
    """A setting from the command line, else from the ini file ("" when neither has it)."""
    value = config.getoption(dest)
    if value is None:
        value = config.getini(dest)
    return str(value or "").strip()


@dataclass(frozen=True)
class TestSpan:
    """When one test (setup, call and teardown) ran, on the proxy's wall clock."""

    __test__ = False  # not a test class, whatever its name

    nodeid: str
    start_ns: int
    end_ns: int


def attribute(first_ns: int | None, spans: Sequence[TestSpan]) -> str | None:
    """The test during which a finding's first evidence arrived: the span holding `first_ns`,
    else the last test that started before it (traffic between tests: its sockets were still
    open); None when it came before every test."""
    if first_ns is None:
        return None
    holding = [s for s in spans if s.start_ns <= first_ns <= s.end_ns]
    if holding:
        return max(holding, key=lambda s: s.start_ns).nodeid
    before = [s for s in spans if s.start_ns <= first_ns]
    return max(before, key=lambda s: s.start_ns).nodeid if before else None


def pytest_configure(config: pytest.Config) -> None:
    settings = Settings.read(config)
    if settings is None:
        return
    worker = _worker_id(config)
    if worker is None:
        _clear_last_session(settings.out)
    config.pluginmanager.register(SeamwatchSession(settings, worker), PLUGIN_NAME)


def _worker_id(config: pytest.Config) -> str | None:
    """The pytest-xdist worker id (gw0, ...) in a worker process, else None."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else None


#: What one session leaves in the out folder; the next session removes exactly these.
_CAPTURE_FOLDER: Final = "capture"
_SPANS_GLOB: Final = "tests-*.json"
_LOG_GLOB: Final = "proxy-*.log"


def _clear_last_session(out: Path) -> None:
    """Remove what the last session left in `out` (captures, test times, logs, reports), so this
    session's analysis reads its own traffic only; a capture folder holding anything else is a
    usage error, never deleted."""
    if not out.exists():
        return
    folders = [out / _CAPTURE_FOLDER, *out.glob(f"{_CAPTURE_FOLDER}-*")]
    for folder in folders:
        if not folder.is_dir():
            continue
        strangers = [
            p.name
            for p in folder.iterdir()
            if not (p.name.startswith("capture-") or p.name == ".seamwatch-cache")
        ]
        if strangers:
            raise pytest.UsageError(
                f"--seamwatch-out: {folder} holds {strangers[0]!r}, not a seamwatch capture: "
                "choose another folder"
            )
    for folder in folders:
        if folder.is_dir():
            shutil.rmtree(folder)
    for path in [*out.glob(_SPANS_GLOB), *out.glob(_LOG_GLOB)]:
        path.unlink()
    for name in REPORT_FILES.values():
        (out / name).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def seamwatch_proxy(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of `seamwatch proxy` in front of `--seamwatch-upstream` (started once, before
    the first test that asks for it); point the MCP client there."""
    session = request.config.pluginmanager.get_plugin(PLUGIN_NAME)
    if not isinstance(session, SeamwatchSession):
        pytest.fail(
            "seamwatch_proxy needs an upstream: pass --seamwatch-upstream URL "
            "(or set seamwatch_upstream in the ini file)",
            pytrace=False,
        )
    try:
        url = session.start_proxy()
    except ProxyFailed as e:
        reason = f"seamwatch: the proxy did not start: {e}"
    else:
        yield url
        session.stop_proxy()
        return
    # One line, and the session stops after this test; pytest.exit would do the same alone,
    # but a pytest-xdist worker cannot end its session that way.
    request.session.shouldstop = reason
    pytest.fail(reason, pytrace=False)


@dataclass
class SeamwatchSession:
    """The plugin's state in one pytest process (the whole run, or one xdist worker)."""

    settings: Settings
    worker: str | None
    spans: list[TestSpan] = field(default_factory=list)
    proxy: ProxyProcess | None = None
    proxy_exit: int | None = None
    #: what the terminal summary prints (filled at session end by the process that analyzes)
    lines: list[str] = field(default_factory=list)
    failed: bool = False

    @property
    def capture(self) -> Path:
        """This process's capture folder."""
        name = _CAPTURE_FOLDER if self.worker is None else f"{_CAPTURE_FOLDER}-{self.worker}"
        return self.settings.out / name

    @property
    def _tag(self) -> str:
        return self.worker or "main"

    def start_proxy(self) -> str:
        """Start the proxy (once) and return its URL; ProxyFailed when it cannot start."""
        if self.proxy is None:
            self.settings.out.mkdir(parents=True, exist_ok=True)
            log_path = self.settings.out / f"proxy-{self._tag}.log"
            self.proxy = launch(
                self.settings.upstream,
                self.capture,
                log_path,
                replica_header=self.settings.replica_header,
            )
        return self.proxy.url

    def stop_proxy(self) -> None:
        if self.proxy is not None and self.proxy_exit is None:
            self.proxy_exit = self.proxy.stop()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        start = time.time_ns()
        try:
            return (yield)
        finally:
            self.spans.append(TestSpan(item.nodeid, start, time.time_ns()))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop_proxy()
        if self.proxy is not None:
            spans = [s.__dict__ for s in self.spans]
            record = {"capture": self.capture.name, "proxy_exit": self.proxy_exit, "tests": spans}
            (self.settings.out / f"tests-{self._tag}.json").write_text(
                json.dumps(record), encoding="utf-8"
            )
        if self.worker is not None:
            return  # the controller analyzes every worker's capture at once
        self.failed = self._analyze()
        if self.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _analyze(self) -> bool:
        """Analyze what this session captured; True when the run must fail."""
        runs = _recorded_runs(self.settings.out)
        if not runs:
            return False  # no test asked for the proxy: nothing was started
        try:
            outcome = _run_analysis(self.settings, runs)
        except Exception as e:  # the tests' verdict stands; say why the analysis did not
            self.lines.append(f"seamwatch: the analysis failed: {_one_line(e)}")
            return True
        self.lines.extend(outcome.lines)
        return outcome.failed

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.lines:
            return
        terminalreporter.section("seamwatch", red=self.failed, green=not self.failed)
        for line in self.lines:
            terminalreporter.line(line)


@dataclass(frozen=True)
class _RecordedRun:
    """One process's capture folder and the times of the tests it ran."""

    capture: Path
    spans: tuple[TestSpan, ...]
    proxy_exit: int | None


def _recorded_runs(out: Path) -> list[_RecordedRun]:
    """Every capture of this session (one per process that started a proxy), in name order."""
    runs = []
    for path in sorted(out.glob(_SPANS_GLOB)):
        record = json.loads(path.read_text(encoding="utf-8"))
        capture = out / str(record["capture"])
        if not any(capture.glob("capture-*.jsonl*")):
            continue
        spans = tuple(TestSpan(**span) for span in record["tests"])
        runs.append(_RecordedRun(capture, spans, record.get("proxy_exit")))
    return runs


@dataclass(frozen=True)
class _Outcome:
    lines: list[str]
    failed: bool


def _run_analysis(settings: Settings, runs: Sequence[_RecordedRun]) -> _Outcome:
    """Analyze the captures, write the reports, and say what fails the run."""
    import tempfile

    from analyzer.analysis import load_timeline
    from analyzer.baseline import apply_baseline, load_baseline
    from analyzer.detectors import run_detectors, select_detectors
    from analyzer.report import at_or_above
    from analyzer.report.run import build_report, write_report
    from analyzer.scratch import scratch_prefix

    paths = [run.capture for run in runs]
    # Read first: a bad baseline fails before the analysis is paid for.
    accepted = load_baseline(settings.baseline) if settings.baseline else None
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spill")) as spill:
        timeline = load_timeline(
            paths,
            replica_header=settings.replica_header,
            client_header=None,
            use_cache=True,
            spill_dir=Path(spill),
        )
        chosen = select_detectors()
        findings = run_detectors(timeline)
        report = build_report(timeline, findings, chosen, fail_on=settings.fail_on)
    outcome: BaselineOutcome | None = None
    if accepted is not None and settings.baseline is not None:
        outcome = apply_baseline(report.findings, accepted, path=_shown(settings.baseline))
        report = report.with_baseline(outcome)
    written = []
    for fmt in settings.reports:
        target = settings.out / REPORT_FILES[fmt]
        write_report(report, fmt, str(target))
        written.append(str(target))

    failing = at_or_above(report.new_findings, settings.fail_on)
    threshold = settings.fail_on.value if settings.fail_on else "none"
    lines = [
        f"capture: {', '.join(_shown(p) for p in paths)}; {report.findings.height} finding(s), "
        f"{failing.height} at or above {threshold}"
        + (f"; reports: {', '.join(_shown(Path(w)) for w in written)}" if written else "")
    ]
    lines += [
        f"{run.capture}: the proxy exited {run.proxy_exit}: its capture is incomplete"
        for run in runs
        if run.proxy_exit not in (0, None)
    ]
    lines += _finding_lines(report, failing, runs)
    if outcome is not None:
        lines.append(
            f"baseline {outcome.path}: {outcome.baselined.height} baselined, "
            f"{len(outcome.fixed)} fixed (no longer found: prune them)"
        )
        lines += [f"  fixed: {e.detector} {e.fingerprint} {e.title}" for e in outcome.fixed]
    return _Outcome(lines, failing.height > 0)


def _finding_lines(
    report: Report, failing: pl.DataFrame, runs: Sequence[_RecordedRun]
) -> list[str]:
    """One line per failing finding: detector, severity, title, the test that caused it."""
    if not failing.height:
        return []
    by_capture = {str(run.capture): run.spans for run in runs}
    every_span = [span for run in runs for span in run.spans]
    lines = [f"FAILED: {failing.height} finding(s) fail the run:"]
    rows = failing.select(
        "detector",
        "severity",
        "title",
        "flow_ids",
        first_ns=failing["first_ts"].dt.epoch("ns"),
    )
    for row in rows.iter_rows(named=True):
        spans: Sequence[TestSpan] = every_span
        flows = row["flow_ids"] or []
        if flows and flows[0] in report.flow_inputs:
            index = report.flow_inputs[flows[0]]
            if 0 <= index < len(report.inputs):
                spans = by_capture.get(report.inputs[index].path, every_span)
        test = attribute(row["first_ns"], spans)
        if test is not None:
            where = f"during {test}"
        else:
            where = "no time known" if row["first_ns"] is None else "before the first test"
        lines.append(f"  {row['detector']} [{row['severity']}] {row['title']} ({where})")
    return lines


def _shown(path: Path) -> str:
    """A path as the user finds it: relative to the working folder when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
