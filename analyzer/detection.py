"""Detection: the `Detector` type, the `--config` / `--only` / `--disable` checks and the runner.

A detector module of `analyzer.detectors` imports `Detector` from here, and the registry there
lists each module's row: this module imports no detector, so neither imports the other back.
The functions here take the detectors to work on; `analyzer.detectors` binds them to the
registry. The runner collects each detector on its own, so a detector that raises costs its own
findings only: it becomes one `analysis-error` finding and the others still run (STYLE.md 5).
"""

from __future__ import annotations

import inspect
import math
import re
import tomllib
import types
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from analyzer import UserError
from analyzer.findings import (
    Severity,
    as_findings,
    empty_findings,
    findings_frame,
    finish_findings,
    validate_findings,
)

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

#: Id of the finding the runner writes for a detector that raised.
ANALYSIS_ERROR: Final = "analysis-error"
# Detectors run two at a time: each one's plans have serial stretches (building the plan, small
# frames, operators on one thread) that the other fills, for a little more peak memory.
_AT_ONCE: Final = 2

_ID = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")

#: Validated `--config`: detector id -> threshold keyword -> value.
DetectorConfig = Mapping[str, Mapping[str, object]]


class ConfigError(UserError):
    """A `--config` file, `--only` or `--disable` naming something that does not exist."""


@dataclass(frozen=True)
class Detector:
    """One registry row: a detector's id, default severity, description and function.

    `detect(timeline, *, threshold=default, ...)` returns a LazyFrame of findings columns (see
    `analyzer.findings.as_findings`); its keyword-only parameters are the detector's
    thresholds, configurable per id in `--config`, and are read into `thresholds` here.
    `description` is the module docstring: its first line says what the detector flags, the
    rest what it must not flag; `remedy` what to change (older rows still say it in the
    description).
    """

    id: str
    severity: Severity
    description: str
    detect: Callable[..., pl.LazyFrame]
    thresholds: Mapping[str, object] = field(init=False, compare=False, hash=False)
    #: What to change, said once: the end of every finding's detail (`findings.emit`) and,
    #: after the description, the SARIF rule's help.
    remedy: str = ""

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.id):
            raise ValueError(f"detector id {self.id!r} is not lowercase words joined by '-'")
        if not isinstance(self.severity, Severity):
            raise TypeError(f"{self.id}: severity must be a Severity")
        if not (self.description or "").strip():
            raise ValueError(f"{self.id}: a detector needs a description (its module docstring)")
        object.__setattr__(self, "thresholds", _thresholds(self.id, self.detect))

    @property
    def summary(self) -> str:
        """The first line of the description."""
        return self.description.strip().splitlines()[0].strip()


def _thresholds(detector_id: str, detect: Callable[..., pl.LazyFrame]) -> Mapping[str, object]:
    """Read a detect function's keyword defaults; reject any other kind of parameter."""
    params = list(inspect.signature(detect).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise TypeError(f"{detector_id}: detect must take the timeline as its first argument")
    defaults: dict[str, object] = {}
    for param in params[1:]:
        if param.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{detector_id}: threshold {param.name!r} must be keyword-only")
        if param.default is inspect.Parameter.empty:
            raise TypeError(f"{detector_id}: threshold {param.name!r} needs a default")
        defaults[param.name] = param.default
    return types.MappingProxyType(defaults)


def analysis_error_finding(detector_id: str, error: BaseException) -> pl.DataFrame:
    """The one finding reporting that `detector_id` raised `error`."""
    kind = type(error).__name__
    message = str(error).strip() or "(no message)"
    return findings_frame(
        [
            {
                "detector": ANALYSIS_ERROR,
                "severity": Severity.HIGH,
                "title": f"detector {detector_id} failed: {kind}",
                "detail": (
                    f"{detector_id} raised {kind}: {message}\n"
                    f"Its findings are missing from this report; the other detectors ran."
                ),
                # Distinct per failing detector and error kind; the message may hold paths.
                "fingerprint_extra": [detector_id, kind],
            }
        ]
    )


def select_detectors(
    *,
    only: Iterable[str] | None = None,
    disable: Iterable[str] | None = None,
    detectors: Iterable[Detector],
) -> tuple[Detector, ...]:
    """The detectors to run, in id order; an unknown id in `only` or `disable` is a ConfigError.

    `analysis-error` is always kept: disabling it must not hide a detector that failed. A
    selection that leaves no other detector (an empty `--only`, or one `--disable` cancels) is a
    ConfigError too: a run that judges nothing must not pass a CI job.
    """
    registry = _by_id(detectors)
    only_ids = _known_ids(only, registry, "--only")
    disabled = _known_ids(disable, registry, "--disable")
    chosen = [
        det
        for det_id, det in sorted(registry.items())
        if det_id == ANALYSIS_ERROR
        or ((only_ids is None or det_id in only_ids) and det_id not in (disabled or set()))
    ]
    if not any(det.id != ANALYSIS_ERROR for det in chosen):
        raise ConfigError("--only and --disable leave no detector to run")
    return tuple(chosen)


def load_config(path: Path, detectors: Iterable[Detector]) -> DetectorConfig:
    """Read a `--config` TOML file of `[detectors.<id>]` threshold tables and validate it."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8 text (byte {e.start})") from e
    unknown = sorted(set(data) - {"detectors"})
    if unknown:
        raise ConfigError(f"config {path}: unknown table(s) {', '.join(unknown)}")
    tables = data.get("detectors", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"config {path}: 'detectors' must be a table of [detectors.<id>]")
    try:
        return validate_config(tables, detectors)
    except ConfigError as e:
        raise ConfigError(f"config {path}: {e}") from None


def validate_config(config: Mapping[str, object], detectors: Iterable[Detector]) -> DetectorConfig:
    """Check detector ids, threshold names and value types; return the config as plain dicts."""
    registry = _by_id(detectors)
    out: dict[str, dict[str, object]] = {}
    for det_id, table in sorted(config.items()):
        det = registry.get(det_id)
        if det is None:
            raise ConfigError(f"unknown detector {det_id!r} (known: {', '.join(sorted(registry))})")
        if not isinstance(table, Mapping):
            raise ConfigError(f"detectors.{det_id} must be a table of thresholds")
        values: dict[str, object] = {}
        for key, value in sorted(table.items()):
            if key not in det.thresholds:
                known = ", ".join(sorted(det.thresholds)) or "none"
                raise ConfigError(
                    f"unknown threshold {key!r} for detector {det_id} (its thresholds: {known})"
                )
            default = det.thresholds[key]
            if not _same_kind(default, value):
                raise ConfigError(
                    f"detectors.{det_id}.{key} must be {type(default).__name__}, "
                    f"not {type(value).__name__}"
                )
            value = _as_kind(default, value)
            if isinstance(value, int | float) and not 0 <= value < math.inf:
                raise ConfigError(f"detectors.{det_id}.{key} must be a finite number >= 0")
            values[key] = value
        out[det_id] = values
    return out


def run_detectors(
    timeline: Timeline,
    *,
    only: Iterable[str] | None = None,
    disable: Iterable[str] | None = None,
    config: DetectorConfig | None = None,
    detectors: Iterable[Detector],
    on_start: Callable[[Detector], None] | None = None,
) -> pl.DataFrame:
    """Run the selected detectors on a timeline; return their findings in report order.

    Each detector is collected on its own (two at a time). One that raises, or returns a frame
    that is not findings, yields one `analysis-error` finding (high, its detail the exception)
    and the others still run. `on_start` is told of each detector as it starts (progress display).
    Raises ConfigError for an unknown id in `only`, `disable` or `config`.
    """
    registry = tuple(detectors)
    chosen = select_detectors(only=only, disable=disable, detectors=registry)
    thresholds = validate_config(config or {}, registry)

    def run(det: Detector) -> pl.DataFrame:
        try:
            found = det.detect(timeline, **thresholds.get(det.id, {}))
            # The streaming engine: a detector's scans of the record-level frames run in
            # batches, so memory follows what the plan keeps, not the size of the capture.
            frame = as_findings(found, detector=det.id, severity=det.severity).collect(
                engine="streaming"
            )
            return validate_findings(frame)
        except Exception as e:  # any failure of one detector, by design (STYLE.md item 5)
            return analysis_error_finding(det.id, e)

    # `_AT_ONCE` detectors run at a time, each started (and `on_start` told, in order) as soon
    # as one before it is done; their findings are kept in registry order.
    started: list[Future[pl.DataFrame]] = []
    with ThreadPoolExecutor(max_workers=_AT_ONCE) as pool:
        running: set[Future[pl.DataFrame]] = set()
        for det in chosen:
            if len(running) == _AT_ONCE:
                _, running = wait(running, return_when=FIRST_COMPLETED)
            if on_start is not None:
                on_start(det)
            started.append(pool.submit(run, det))
            running.add(started[-1])
    frames = [future.result() for future in started]
    findings = pl.concat(frames, how="vertical") if frames else empty_findings()
    return finish_findings(findings)


def _by_id(detectors: Iterable[Detector]) -> dict[str, Detector]:
    registry: dict[str, Detector] = {}
    for det in detectors:
        if det.id in registry:
            raise ValueError(f"detector id {det.id!r} registered twice")
        registry[det.id] = det
    return registry


def _known_ids(
    ids: Iterable[str] | None, registry: Mapping[str, Detector], option: str
) -> set[str] | None:
    if ids is None:
        return None
    if isinstance(ids, str):  # "a,b" as the command line gives it
        ids = ids.split(",")
    chosen = {i.strip() for i in ids if i.strip()}
    unknown = sorted(chosen - set(registry))
    if unknown:
        raise ConfigError(
            f"{option}: unknown detector(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(registry))})"
        )
    return chosen


def _as_kind(default: object, value: object) -> object:
    """A config value in the type of the threshold's default."""
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, tuple) and isinstance(value, list):
        return tuple(value)
    return value


def _same_kind(default: object, value: Any) -> bool:
    """Whether a TOML value may replace a threshold's default (ints widen to float)."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    if isinstance(default, tuple | list):
        return isinstance(value, list)
    return isinstance(value, type(default))
