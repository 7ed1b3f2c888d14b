"""The Spark engine gives the default engine's findings, summary and inputs (analyzer/spark),
and its OTLP document (`--format otlp-json`).

Each case runs both engines on the same input: synthetic captures with every option of
`bench/synth_capture.py` (20k events; `SEAMWATCH_SPARK_EVENTS=1000000` for the 1M check) and the
lab's captures, whose scenarios plant every fault the detectors know.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer.analysis import read_timeline
from analyzer.cli import main as seamwatch
from analyzer.detectors import run_detectors
from analyzer.otlp.command import otlp_json
from analyzer.spark import OtlpOut, SparkResult, spark_findings
from lab.scenarios import SCENARIOS
from tests.support.engines import assert_same_results
from tests.support.lab_capture import LabRuns

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "dashboard" / "round-robin-replicas"
EVENTS = int(os.environ.get("SEAMWATCH_SPARK_EVENTS", "20000"))

SYNTH_OPTIONS = {
    "plain": (),
    "counter-ids": ("--counter-ids",),
    "get-resumes": ("--get-resumes", "3"),
    "all": ("--counter-ids", "--get-resumes", "2", "--per-session", "150", "--rotate", "9000",
            "--seed", "5"),
}  # fmt: skip


def assert_same_analysis(paths: list[Path]) -> pl.DataFrame:
    """Both engines on `paths` (the cache filled by the first): equal findings, counts, inputs."""
    timeline = read_timeline(paths)
    return assert_same_results(spark_findings(paths), timeline)


def assert_same_otlp(
    paths: list[Path], *, payloads: bool, cache: bool = False, partition_bytes: int | None = None
) -> SparkResult:
    """Both engines' OTLP/JSON documents of `paths` are the same bytes (the default engine reads
    no cache; `cache`: the Spark engine's, beside the first input; `partition_bytes`: small, the
    traces reach the driver in many partitions). Returns Spark's result."""
    timeline = read_timeline(paths, cache=False)
    expected = otlp_json(timeline, run_detectors(timeline), payloads=payloads)
    pieces: list[str] = []
    out = OtlpOut(pieces.append, payloads=payloads, partition_bytes=partition_bytes)
    result = spark_findings(paths, cache=cache, otlp=out)
    assert len(pieces) > 2  # written a piece at a time
    assert "".join(pieces) == expected
    assert '"spans":[{' in expected  # not an empty document
    return result


def synthetic_capture(out: Path, *options: str) -> Path:
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synth_capture.py"), str(out),
         "--events", str(EVENTS), *options],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


@pytest.mark.parametrize("options", SYNTH_OPTIONS.values(), ids=SYNTH_OPTIONS.keys())
def test_synthetic_captures(spark: Any, tmp_path: Path, options: tuple[str, ...]) -> None:
    assert_same_analysis([synthetic_capture(tmp_path / "capture", *options)])


def test_otlp_document_of_a_synthetic_capture_with_resumes(spark: Any, tmp_path: Path) -> None:
    capture = synthetic_capture(tmp_path / "capture", "--get-resumes", "3", "--counter-ids")
    assert not assert_same_otlp([capture], payloads=True, partition_bytes=256 * 1024).cached
    # With the Spark cache: the first run parses and writes it, the second reads it.
    assert not assert_same_otlp([capture], payloads=False, cache=True).cached
    assert assert_same_otlp([capture], payloads=True, cache=True).cached


# The scenarios whose faults relate sessions (a cursor carried into a new session, an event
# store shared by sessions, a resume on another replica) and two clean ones.
CROSSING = ("legacy-cursor-carryover", "shared-event-store", "round-robin-replicas")
CLEAN = ("clean-resume", "clean-stateless")


@pytest.fixture(scope="module")
def lab_captures(lab_runs: LabRuns) -> list[Path]:
    """The capture folders of lab scenarios run on 127.0.0.1: those above, from the test
    session's runs (a scenario another test ran is not run again), or every scenario of a
    `seamwatch lab run --all --out DIR` named by `SEAMWATCH_SPARK_LAB=DIR` (the whole lab takes
    many minutes on a shared machine)."""
    given = os.environ.get("SEAMWATCH_SPARK_LAB")
    if given:
        found = sorted(Path(given).glob("*/capture"))
        assert len(found) == len(SCENARIOS), f"{given} holds {len(found)} lab captures"
        return found
    chosen = [s.name for s in SCENARIOS if s.name in CROSSING + CLEAN]
    return [lab_runs.directory(name) / "capture" for name in chosen]


def test_lab_captures_merged(lab_captures: list[Path], spark: Any) -> None:
    found = assert_same_analysis(lab_captures)
    assert found["detector"].n_unique() >= 3  # the scenarios' faults, not a clean run


@pytest.mark.parametrize("name", CROSSING)
def test_lab_capture(lab_captures: list[Path], spark: Any, name: str) -> None:
    (capture,) = [path for path in lab_captures if path.parent.name == name]
    assert assert_same_analysis([capture]).height > 0


def _second_session_elsewhere(capture: Path, out: Path) -> Path:
    """`capture` with the requests of its second MCP session sent to another origin (as a
    forward proxy records a client of two servers): the run reaches two origins."""
    out.mkdir(mode=0o700)
    seen: list[str] = []
    for path in sorted(capture.glob("*.jsonl")):
        lines = []
        for line in path.read_bytes().splitlines():
            record = json.loads(line)
            headers = dict((k.lower(), v) for k, v in record.get("headers") or [])
            session = headers.get("mcp-session-id")
            if record.get("kind") == "request" and session is not None:
                seen += [session] if session not in seen else []
                if seen.index(session) == 1:
                    record["authority"] = "other.test:9001"
            lines.append(json.dumps(record).encode())
        (out / path.name).write_bytes(b"\n".join(lines) + b"\n")
    assert len(seen) == 2
    return out


def test_a_run_reaching_two_origins(lab_captures: list[Path], spark: Any, tmp_path: Path) -> None:
    """Session keys end with `@origin` when some run reaches several origins, judged over every
    input: a bucket holding one origin's sessions keys them as the whole capture does."""
    (lab,) = [path for path in lab_captures if path.parent.name == "legacy-cursor-carryover"]
    capture = _second_session_elsewhere(lab, tmp_path / "capture")
    found = assert_same_analysis([capture])
    assert found.height > 0
    assert found["session"].drop_nulls().str.contains("@http://").all()


def test_otlp_document_of_the_lab_captures_merged(lab_captures: list[Path], spark: Any) -> None:
    assert_same_otlp(lab_captures, payloads=True, partition_bytes=16 * 1024)


@pytest.mark.parametrize("name", CROSSING)
def test_otlp_document_of_a_lab_capture(lab_captures: list[Path], spark: Any, name: str) -> None:
    (capture,) = [path for path in lab_captures if path.parent.name == name]
    assert_same_otlp([capture], payloads=False)


def report(argv: list[str], out: Path) -> tuple[int, bytes]:
    code = seamwatch([*argv, "--out", str(out)])
    return code, out.read_bytes() if out.exists() else b""


@pytest.mark.parametrize("fmt", ["json", "sarif", "otlp-json"])
def test_the_command_gives_the_same_report_and_exit_code(
    spark: Any, tmp_path: Path, fmt: str
) -> None:
    capture = tmp_path / "round-robin-replicas"
    shutil.copytree(FIXTURE, capture)
    argv = ["analyze", str(capture / "capture"), "--format", fmt]
    default = report(argv, tmp_path / f"default.{fmt}")
    assert default[0] == 1  # its findings fail the run (--fail-on medium)
    assert report([*argv, "--engine", "spark"], tmp_path / f"spark.{fmt}") == default
