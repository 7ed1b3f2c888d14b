"""The detector registry, the Detector type, the runner and `--config` (analyzer/detectors)."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

import analyzer.detectors as detectors_pkg
from analyzer.detectors import (
    ANALYSIS_ERROR,
    DETECTORS,
    ConfigError,
    Detector,
    load_config,
    run_detectors,
    select_detectors,
    validate_config,
)
from analyzer.findings import FINDINGS_SCHEMA, Severity, finding_rows

TIMELINE: Any = SimpleNamespace()  # the fake detectors below never look at it


# --- every module is listed (STYLE.md item 8) -------------------------------------------------


def detector_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(detectors_pkg.__path__)
        if not info.name.startswith("_")
    )


def test_every_detector_module_is_listed_once() -> None:
    listed = {det.id: det for det in DETECTORS}
    assert len(listed) == len(DETECTORS), "a detector id is registered twice"
    modules = detector_modules()
    assert len(modules) == len(DETECTORS)
    for name in modules:
        module = importlib.import_module(f"analyzer.detectors.{name}")
        row = getattr(module, "DETECTOR", None)
        assert isinstance(row, Detector), f"{name}.py has no DETECTOR row"
        assert row in DETECTORS, f"{name}.py is not listed in DETECTORS"
        assert row.id == name.replace("_", "-"), "a detector module is named after its id"
        assert row.detect is module.detect
        assert row.description == module.__doc__


def test_builtins_are_registered() -> None:
    ids = {det.id for det in DETECTORS}
    assert {ANALYSIS_ERROR, "capture-health"} <= ids
    assert next(d for d in DETECTORS if d.id == ANALYSIS_ERROR).severity is Severity.HIGH


# --- the Detector type -------------------------------------------------------------------------


def detect_with_thresholds(
    timeline: Any, *, window_s: float = 120.0, min_resumes: int = 5
) -> pl.LazyFrame:
    return finding_rows([])


def test_thresholds_are_read_from_the_signature() -> None:
    det = Detector("resume-loop", Severity.MEDIUM, "Flags loops.\n\nMore.", detect_with_thresholds)
    assert dict(det.thresholds) == {"window_s": 120.0, "min_resumes": 5}
    assert det.summary == "Flags loops."
    with pytest.raises(TypeError):
        det.thresholds["window_s"] = 1  # type: ignore[index]


def positional_threshold(timeline: Any, window_s: float = 1.0) -> pl.LazyFrame:
    return finding_rows([])


def no_default(timeline: Any, *, window_s: float) -> pl.LazyFrame:
    return finding_rows([])


def no_timeline(*, window_s: float = 1.0) -> pl.LazyFrame:
    return finding_rows([])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"id": "Bad_Id"}, ValueError, "lowercase words"),
        ({"id": "trailing-"}, ValueError, "lowercase words"),
        ({"description": "  "}, ValueError, "description"),
        ({"severity": "high"}, TypeError, "Severity"),
        ({"detect": positional_threshold}, TypeError, "keyword-only"),
        ({"detect": no_default}, TypeError, "needs a default"),
        ({"detect": no_timeline}, TypeError, "timeline"),
    ],
)
def test_detector_rows_are_checked(kwargs: dict[str, Any], error: type, message: str) -> None:
    fields: dict[str, Any] = {
        "id": "good-id",
        "severity": Severity.LOW,
        "description": "Flags something.",
        "detect": detect_with_thresholds,
    }
    with pytest.raises(error, match=message):
        Detector(**(fields | kwargs))


# --- the runner ----------------------------------------------------------------------------


def finds(title: str, severity: str | None = None, **extra: object) -> Any:
    """A detect function that returns one finding."""

    def detect(timeline: Any) -> pl.LazyFrame:
        row: dict[str, object] = {"title": title, "detail": f"{title} detail"} | extra
        if severity is not None:
            row["severity"] = severity
        return finding_rows([row])

    return detect


def boom(timeline: Any) -> pl.LazyFrame:
    raise RuntimeError("index out of range in stream 9")


def bad_frame(timeline: Any) -> pl.LazyFrame:
    return pl.LazyFrame({"title": ["t"], "detail": ["d"], "event_id": [["e1"]]})


def lazy_boom(timeline: Any) -> pl.LazyFrame:
    # fails only when collected, as a real Polars query would
    return pl.LazyFrame({"x": ["a"]}).select(
        pl.col("x").cast(pl.Int64).cast(pl.String).alias("title"), detail=pl.lit("d")
    )


def registry(*rows: tuple[str, Any]) -> tuple[Detector, ...]:
    made = [Detector(det_id, Severity.MEDIUM, f"{det_id} doc", fn) for det_id, fn in rows]
    return (*made, next(d for d in DETECTORS if d.id == ANALYSIS_ERROR))


FAKES = registry(
    ("alpha", finds("alpha found", session="mcp:1", event_ids=["e1"])),
    ("bravo", boom),
    ("charlie", finds("charlie found", "high", session="mcp:2")),
)


def test_a_failing_detector_gives_one_analysis_error_and_the_others_run() -> None:
    got = run_detectors(TIMELINE, detectors=FAKES)
    assert got.schema == FINDINGS_SCHEMA
    assert got.select("detector", "severity").rows() == [
        ("analysis-error", "high"),
        ("charlie", "high"),
        ("alpha", "medium"),
    ]
    error = got.row(0, named=True)
    assert error["title"] == "detector bravo failed: RuntimeError"
    assert "RuntimeError: index out of range in stream 9" in error["detail"]
    assert error["session"] is None


@pytest.mark.parametrize("broken", [bad_frame, lazy_boom])
def test_a_detector_returning_a_bad_frame_is_an_analysis_error(broken: Any) -> None:
    got = run_detectors(TIMELINE, detectors=registry(("alpha", broken), ("bravo", finds("ok"))))
    assert sorted(got["detector"].to_list()) == ["analysis-error", "bravo"]
    assert "alpha failed" in got.filter(pl.col("detector") == ANALYSIS_ERROR)["title"].item()


def test_each_failing_detector_gets_its_own_error_fingerprint() -> None:
    got = run_detectors(TIMELINE, detectors=registry(("alpha", boom), ("bravo", boom)))
    assert got.height == 2
    assert got["fingerprint"].is_unique().all()
    assert not got["fingerprint"].str.contains("~").any()


def test_runner_output_is_deterministic() -> None:
    first = run_detectors(TIMELINE, detectors=FAKES)
    second = run_detectors(TIMELINE, detectors=tuple(reversed(FAKES)))
    assert first.equals(second)


def test_only_and_disable() -> None:
    only = run_detectors(TIMELINE, detectors=FAKES, only=["charlie"])
    assert only["detector"].to_list() == ["charlie"]
    disabled = run_detectors(TIMELINE, detectors=FAKES, disable=["bravo", "charlie"])
    assert disabled["detector"].to_list() == ["alpha"]


def test_analysis_error_cannot_be_disabled() -> None:
    chosen = select_detectors(only=["alpha"], disable=[ANALYSIS_ERROR], detectors=FAKES)
    assert [d.id for d in chosen] == ["alpha", ANALYSIS_ERROR]


@pytest.mark.parametrize(
    ("only", "disable"),
    [
        ([], None),
        (["alpha"], ["alpha"]),
        (None, ["alpha", "bravo", "charlie"]),
        ([ANALYSIS_ERROR], None),
    ],
)
def test_a_selection_of_no_detector_is_a_config_error(
    only: list[str] | None, disable: list[str] | None
) -> None:
    with pytest.raises(ConfigError, match="leave no detector to run"):
        select_detectors(only=only, disable=disable, detectors=FAKES)


def test_two_detectors_run_at_once() -> None:
    # Each waits until the other has started: one after the other, the first would time out.
    both = threading.Barrier(2, timeout=10)

    def meets(title: str) -> Any:
        def detect(timeline: Any) -> pl.LazyFrame:
            both.wait()
            return finding_rows([{"title": title, "detail": "d"}])

        return detect

    got = run_detectors(TIMELINE, detectors=registry(("alpha", meets("a")), ("bravo", meets("b"))))
    assert sorted(got["title"]) == ["a", "b"]


def test_on_start_sees_each_detector_in_id_order() -> None:
    seen: list[str] = []
    run_detectors(TIMELINE, detectors=FAKES, on_start=lambda d: seen.append(d.id))
    assert seen == ["alpha", ANALYSIS_ERROR, "bravo", "charlie"]


@pytest.mark.parametrize("option", ["only", "disable"])
def test_unknown_ids_in_only_or_disable_are_config_errors(option: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown detector.*nope.*known: alpha"):
        run_detectors(TIMELINE, detectors=FAKES, **{option: ["alpha", "nope"]})


def test_select_detectors_on_the_real_registry() -> None:
    assert select_detectors() == tuple(sorted(DETECTORS, key=lambda d: d.id))


# --- thresholds and --config ------------------------------------------------------------------


def windowed(timeline: Any, *, window_s: float = 120.0, limit: int = 5) -> pl.LazyFrame:
    return finding_rows([{"title": f"window {window_s!r} limit {limit!r}", "detail": "d"}])


WINDOWED = registry(("repeated-thing", windowed))


def test_config_thresholds_reach_the_detector() -> None:
    config = validate_config({"repeated-thing": {"window_s": 30, "limit": 2}}, WINDOWED)
    assert config == {"repeated-thing": {"window_s": 30.0, "limit": 2}}
    got = run_detectors(TIMELINE, detectors=WINDOWED, config=config)
    assert got["title"].to_list() == ["window 30.0 limit 2"]
    default = run_detectors(TIMELINE, detectors=WINDOWED)
    assert default["title"].to_list() == ["window 120.0 limit 5"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"nope": {}}, "unknown detector 'nope'"),
        ({"repeated-thing": {"windows": 1}}, "unknown threshold 'windows'.*window_s"),
        ({"analysis-error": {"x": 1}}, "its thresholds: none"),
        ({"repeated-thing": {"limit": 2.5}}, "limit must be int, not float"),
        ({"repeated-thing": {"limit": True}}, "limit must be int, not bool"),
        ({"repeated-thing": {"window_s": "60"}}, "window_s must be float, not str"),
        ({"repeated-thing": 5}, "must be a table"),
        ({"repeated-thing": {"window_s": -5}}, "window_s must be a finite number >= 0"),
        ({"repeated-thing": {"limit": -1}}, "limit must be a finite number >= 0"),
        ({"repeated-thing": {"window_s": float("inf")}}, "window_s must be a finite number"),
        ({"repeated-thing": {"window_s": float("nan")}}, "window_s must be a finite number"),
    ],
)
def test_config_errors(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config(config, WINDOWED)
    with pytest.raises(ConfigError, match=message):
        run_detectors(TIMELINE, detectors=WINDOWED, config=config)


def test_load_config_reads_toml(tmp_path: Path) -> None:
    path = tmp_path / "seamwatch.toml"
    path.write_text("[detectors.repeated-thing]\nwindow_s = 60\nlimit = 3\n", encoding="utf-8")
    assert load_config(path, WINDOWED) == {"repeated-thing": {"window_s": 60.0, "limit": 3}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[detectors.nope]\nx = 1\n", "seamwatch.toml: unknown detector 'nope'"),
        ("[detectors.repeated-thing]\nwindow = 1\n", "unknown threshold 'window'"),
        ("[detector.repeated-thing]\nwindow_s = 1\n", "unknown table"),
        ("detectors = 3\n", "must be a table"),
        ("[detectors\n", "not valid TOML"),
    ],
)
def test_load_config_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "seamwatch.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(path, WINDOWED)


def test_load_config_of_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "seamwatch.toml"
    path.write_bytes(b"\xff\xfe[detectors]\n")
    with pytest.raises(ConfigError, match=r"seamwatch\.toml is not UTF-8 text"):
        load_config(path, WINDOWED)


def test_load_config_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "absent.toml", WINDOWED)


def test_an_empty_config_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("", encoding="utf-8")
    assert load_config(path) == {}


def test_the_per_session_and_cross_session_split_covers_the_registry_once() -> None:
    from analyzer.detectors import CROSS_SESSION, PER_SESSION

    assert {det.id for det in DETECTORS} >= CROSS_SESSION
    assert {det.id for det in PER_SESSION} | CROSS_SESSION == {det.id for det in DETECTORS}
    assert not {det.id for det in PER_SESSION} & CROSS_SESSION
