"""The lab's scenario framework: start processes, put the seamwatch proxy in front, clean up.

A scenario is a function of a `LabContext`. It starts its servers with `start_process` (each
one waited for until its port accepts TCP, or later with `wait_ready`), puts `seamwatch proxy`
in front with `start_proxy`, drives its scripted client against the proxy's URL (async flows
through `run_async`, bounded by the budget) and records facts with `note`. `run_scenario`
gives it a fresh directory, a wall-clock budget, stops every process it started by pid (SIGTERM,
then SIGKILL) and copies the scenario's `expected.json` beside the capture:

    <out>/<name>/capture/capture-*.jsonl   what the proxy recorded
    <out>/<name>/expected.json             what the scenario does (DESIGN.md §7)
    <out>/<name>/lab.json                  {"scenario", "direct", "notes": {...}, "processes"}
    <out>/<name>/logs/<process>.log        its stdout and stderr
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

DEFAULT_BUDGET_S = 20.0
STOP_TIMEOUT_S = 10.0
PROXY_READY_S = 10.0
EVIDENCE_KEYS = ("event_ids", "request_ids", "flow_ids", "stream_ids")
LAB_RECORD = "lab.json"
# "ModuleNotFoundError: ...", "OSError: [Errno 98] ...": the line that says what went wrong
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception): ")


class LabError(Exception):
    """A scenario could not run as written: a process did not start, the budget ran out, ..."""


@dataclass(frozen=True)
class Expected:
    """What a scenario does, in detector ids (DESIGN.md §5), written before any detector exists.

    `required` must all be found, at least one of each `any_of` group must be found, `allowed`
    may be found; anything else is unexpected. `evidence` names the ids findings should cite,
    keyed like a finding's evidence (`event_ids`, `request_ids`, `flow_ids`, `stream_ids`).
    Request ids are canonical JSON text (`"7"` for the number 7, `"\\"a\\""` for the string a).
    """

    required: list[str] = field(default_factory=list)
    any_of: list[list[str]] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)
    evidence: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: object) -> Expected:
        """Validate a parsed `expected.json` object."""
        if not isinstance(data, dict):
            raise LabError("expected.json must hold an object")
        unknown = set(data) - {"required", "any_of", "allowed", "evidence"}
        if unknown:
            raise LabError(f"expected.json has unknown keys: {sorted(unknown)}")
        required = _str_list(data.get("required", []), "required")
        allowed = _str_list(data.get("allowed", []), "allowed")
        raw_any = data.get("any_of", [])
        if not isinstance(raw_any, list):
            raise LabError("expected.json any_of must be a list of lists")
        any_of = [_str_list(group, "any_of") for group in raw_any]
        raw_evidence = data.get("evidence", {})
        if not isinstance(raw_evidence, dict):
            raise LabError("expected.json evidence must be an object")
        evidence: dict[str, list[str]] = {}
        for key, ids in raw_evidence.items():
            if key not in EVIDENCE_KEYS:
                raise LabError(f"expected.json evidence key {key!r} is not one of {EVIDENCE_KEYS}")
            evidence[key] = _str_list(ids, f"evidence.{key}")
        return cls(required=required, any_of=any_of, allowed=allowed, evidence=evidence)

    @classmethod
    def load(cls, path: Path) -> Expected:
        """Read and validate an `expected.json` file."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LabError(f"cannot read {path}: {exc}") from exc
        return cls.from_json(data)

    def to_json(self) -> dict[str, object]:
        """The object `expected.json` holds."""
        return asdict(self)


def _str_list(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LabError(f"expected.json {what} must be a list of strings")
    return list(value)


@dataclass(frozen=True)
class Scenario:
    """One reproducible piece of traffic; `run` drives it, `expected_path` says what it does."""

    name: str
    description: str
    run: Callable[[LabContext], None]
    expected_path: Path

    @property
    def expected(self) -> Expected:
        return Expected.load(self.expected_path)


def python_argv(module: str, *args: str) -> list[str]:
    """argv that runs `python -m module args...` with the interpreter running the lab."""
    return [sys.executable, "-m", module, *args]


@dataclass
class _Started:
    """A process a scenario started: how to wait for it and how it was stopped."""

    name: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    stop_timeout: float
    port: int
    ready_timeout: float
    began: float = field(default_factory=time.monotonic)
    returncode: int | None = None
    how: str = "running"
    ready_s: float | None = None


class LabContext:
    """What a running scenario may do; everything it starts is stopped by `run_scenario`."""

    def __init__(self, out_dir: Path, *, name: str, direct: bool, budget_s: float) -> None:
        self.out_dir = out_dir
        self.name = name
        # direct=True skips the proxy: start_proxy returns the upstream itself. Development
        # only, while `seamwatch proxy` does not exist yet; nothing is captured then.
        self.direct = direct
        self.deadline = time.monotonic() + budget_s
        self.capture_dir = out_dir / "capture"
        self.log_dir = out_dir / "logs"
        self._notes: dict[str, object] = {}
        self._started: list[_Started] = []
        self._ports: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._write_record()

    def remaining(self) -> float:
        """Seconds left of the scenario's budget (never below 0.1, to keep timeouts valid)."""
        return max(0.1, self.deadline - time.monotonic())

    def run_async(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async client flow to completion, bounded by the scenario's remaining budget."""

        async def bounded() -> T:
            with anyio.fail_after(self.remaining()):
                return await fn(*args)

        return anyio.run(bounded)

    def free_port(self) -> int:
        """A loopback TCP port nobody listens on now, never handed out twice in one scenario."""
        for _ in range(50):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in self._ports:
                self._ports.add(port)
                return port
        raise LabError("no free loopback port")

    def start_process(
        self,
        argv: list[str],
        *,
        name: str,
        port: int,
        env: dict[str, str] | None = None,
        ready_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        wait: bool = True,
    ) -> subprocess.Popen[bytes]:
        """Start `argv`, wait until 127.0.0.1:`port` accepts TCP; stopped by pid at the end.

        Its stdout and stderr go to `logs/<name>.log`. A process that exits or never listens
        raises `LabError` with the tail of that log. With `wait=False` it returns at once and
        `wait_ready(process)` waits later, so slow starters can start side by side.
        """
        with self._lock:
            if self._closed:
                raise LabError(f"{self.name}: the scenario is over, cannot start {name}")
            if any(started.name == name for started in self._started):
                raise LabError(f"{self.name}: two processes named {name!r}")
            child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
            with (self.log_dir / f"{name}.log").open("wb") as log:
                try:
                    process = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=child_env,
                    )
                except OSError as exc:
                    raise LabError(f"{name}: cannot start {argv[0]}: {exc}") from exc
            started = _Started(name, argv, process, stop_timeout, port, ready_timeout)
            self._started.append(started)
        self._write_record()
        if wait:
            self.wait_ready(process)
        return process

    def wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        """Wait until a process started with `wait=False` listens (LabError otherwise)."""
        started = self._find(process)
        if started.ready_s is not None:
            return
        timeout = min(started.ready_timeout, self.remaining())
        self._wait_listening(started.name, process, started.port, timeout)
        started.ready_s = round(time.monotonic() - started.began, 3)
        self._write_record()

    def _find(self, process: subprocess.Popen[bytes]) -> _Started:
        for started in self._started:
            if started.process is process:
                return started
        raise LabError(f"pid {process.pid} was not started by this scenario")

    def _wait_listening(
        self, name: str, process: subprocess.Popen[bytes], port: int, timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            code = process.poll()
            if code is not None:
                raise LabError(
                    f"{name} exited with {code} before listening on {port}: "
                    f"{self.stderr_tail(name)}"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise LabError(
                    f"{name} did not listen on 127.0.0.1:{port} within {timeout:.1f} s: "
                    f"{self.stderr_tail(name)}"
                )
            time.sleep(0.05)

    def stderr_tail(self, name: str, lines: int = 4) -> str:
        """A started process's output (stderr and stdout) for an error message, on one line:
        its first error-looking line, its last `lines` lines and where the whole log is."""
        path = self.log_dir / f"{name}.log"
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no output)"
        all_lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not all_lines:
            return f"(no output; {path})"
        first_error = next((line for line in all_lines if _ERROR_LINE.search(line)), None)
        shown = all_lines[-lines:]
        if first_error is not None and first_error not in shown:
            shown = [first_error, "...", *shown]
        return " | ".join(line[:300] for line in shown) + f" (log: {path})"

    def start_proxy(
        self,
        upstream: str,
        *,
        replica_header: str | None = None,
        client_header: str | None = None,
        name: str = "proxy",
    ) -> str:
        """Put `seamwatch proxy` in front of `upstream`; returns "http://127.0.0.1:PORT"."""
        if self.direct:
            self.note(f"{name}.skipped", upstream)
            return upstream.rstrip("/")
        port = self.free_port()
        argv = python_argv(
            "analyzer.cli",
            "proxy",
            "--upstream",
            upstream,
            "--listen",
            f"127.0.0.1:{port}",
            "--out",
            str(self.capture_dir),
        )
        if replica_header is not None:
            argv += ["--replica-header", replica_header]
        if client_header is not None:
            argv += ["--client-header", client_header]
        # The proxy writes its final records (stream ends, capture_close) on SIGTERM.
        process = self.start_process(argv, name=name, port=port, stop_timeout=STOP_TIMEOUT_S)
        # mitmdump listens before its addon has loaded; the capture file (opened when the
        # addon is configured) says the recording really runs.
        deadline = time.monotonic() + min(PROXY_READY_S, self.remaining())
        while not any(self.capture_dir.glob("capture-*")):
            if process.poll() is not None:
                raise LabError(
                    f"{name} exited with {process.returncode} after listening: "
                    f"{self.stderr_tail(name)}"
                )
            if time.monotonic() > deadline:
                raise LabError(
                    f"{name} listens but wrote no capture file into {self.capture_dir}: "
                    f"{self.stderr_tail(name)}"
                )
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    def note(self, key: str, value: object) -> None:
        """Record a fact for the scenario's tests in lab.json under "notes" (JSON values only)."""
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise LabError(f"note {key!r} is not JSON: {exc}") from exc
        with self._lock:
            self._notes[key] = value
        self._write_record()

    def died_early(self) -> list[str]:
        """One line per started process that exited before the scenario stopped it."""
        return [
            f"{s.name} exited early with {s.process.returncode}: {self.stderr_tail(s.name)}"
            for s in self._started
            if s.how == "running" and s.process.poll() is not None
        ]

    def stop_all(self) -> None:
        """Stop every started process, newest first (the proxy before its upstreams)."""
        with self._lock:
            self._closed = True
            started = list(reversed(self._started))
        for item in started:
            _stop(item)
        self._write_record()

    def _write_record(self) -> None:
        record = {
            "scenario": self.name,
            "direct": self.direct,
            "notes": self._notes,
            "processes": [
                {
                    "name": s.name,
                    "pid": s.process.pid,
                    "argv": s.argv,
                    "returncode": s.returncode,
                    "stopped": s.how,
                    "ready_s": s.ready_s,
                }
                for s in self._started
            ],
        }
        tmp = self.out_dir / f"{LAB_RECORD}.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.out_dir / LAB_RECORD)


def _stop(started: _Started) -> None:
    """SIGTERM the pid, wait, then SIGKILL; never by name."""
    process = started.process
    if process.poll() is not None:
        if started.how == "running":
            started.how = "exited"
        started.returncode = process.returncode
        return
    # Popen.terminate/kill signal this pid only, and do nothing once it has been reaped.
    process.terminate()
    started.how = "sigterm"
    try:
        process.wait(timeout=started.stop_timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        started.how = "sigkill"
        process.wait(timeout=STOP_TIMEOUT_S)
    started.returncode = process.returncode


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: the one worth a message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _died_suffix(died: list[str]) -> str:
    return "".join(f"; {line}" for line in died)


def load_lab_record(scenario_dir: Path) -> dict[str, object]:
    """The lab.json of a scenario directory (its notes are under "notes")."""
    data = json.loads((scenario_dir / LAB_RECORD).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise LabError(f"{scenario_dir / LAB_RECORD} does not hold an object")
    return data


def prepare_out_dir(out_dir: Path) -> None:
    """Make `out_dir` (and its parents) if missing; LabError when scenarios cannot go there.

    Called before any scenario starts, so a bad `--out` is one line, not a failed scenario.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file, or a link to one, where the directory should be
        raise LabError(f"{out_dir}: not a directory") from None
    except OSError as exc:  # a file on the way there, no permission, a read-only file system
        raise LabError(f"{out_dir}: {(exc.strerror or str(exc)).lower()}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise LabError(f"{out_dir}: not writable")


def run_scenario(
    scenario: Scenario,
    out_dir: Path,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    direct: bool = False,
) -> Path:
    """Run `scenario` into `out_dir/<name>/`; returns that directory.

    A directory left by an earlier lab run is replaced; any other existing directory is refused.
    The scenario runs in a worker thread so the budget can be enforced: on overrun its processes
    are stopped (which unblocks its client) and `LabError` is raised. Any failure of the
    scenario surfaces as `LabError`.
    """
    Expected.load(scenario.expected_path)  # validate before starting anything
    scenario_dir = out_dir / scenario.name
    if scenario_dir.exists():
        if not (scenario_dir / LAB_RECORD).exists():
            raise LabError(f"{scenario_dir} exists and was not made by the lab; not replacing it")
        shutil.rmtree(scenario_dir)
    try:
        scenario_dir.mkdir(parents=True)
    except OSError as err:
        raise LabError(f"cannot make {scenario_dir}: {err.strerror or err}") from None
    ctx = LabContext(scenario_dir, name=scenario.name, direct=direct, budget_s=budget_s)
    failure: list[BaseException] = []

    def body() -> None:
        try:
            scenario.run(ctx)
        except BaseException as exc:  # handed to the calling thread
            failure.append(exc)

    worker = threading.Thread(target=body, name=f"lab-{scenario.name}", daemon=True)
    started_at = time.monotonic()
    died: list[str] = []
    try:
        worker.start()
        worker.join(budget_s)
        died = ctx.died_early()
        if failure and not died:
            # A process dying is often why the client failed; give it a moment to be seen.
            grace = time.monotonic() + 1.0
            while not died and time.monotonic() < grace:
                time.sleep(0.05)
                died = ctx.died_early()
        if worker.is_alive():
            ctx.stop_all()
            worker.join(2.0)
            raise LabError(
                f"{scenario.name}: exceeded its {budget_s:.0f} s budget" + _died_suffix(died)
            )
    finally:
        ctx.stop_all()
    ctx.note("duration_s", round(time.monotonic() - started_at, 3))
    if failure:
        exc = failure[0]
        if isinstance(exc, LabError):
            raise exc  # it names the process that failed, if one did
        leaf = _leaf(exc)
        raise LabError(
            f"{scenario.name}: {type(leaf).__name__}: {leaf}" + _died_suffix(died)
        ) from exc
    shutil.copyfile(scenario.expected_path, scenario_dir / "expected.json")
    if not direct and not list(ctx.capture_dir.glob("capture-*.jsonl")):
        raise LabError(f"{scenario.name}: the proxy wrote no capture into {ctx.capture_dir}")
    return scenario_dir
