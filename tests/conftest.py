"""Test tiers: `lab` (real lab servers and the proxy), `proxy` (the real proxy as a process),
`browser` (headless Chromium), `bench` (the benchmark scripts), `spark` (a local Spark session).
`scripts/test --fast` deselects the five and runs the property tests on the `fast` Hypothesis
profile; `scripts/test` runs all, with every property test's full example count."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import proxy
from tests.support.lab_capture import LabRuns

# Property tests check results, not speed (speed is measured by bench/): no example fails for
# taking longer than Hypothesis's 200 ms deadline on a loaded machine.
settings.register_profile("seamwatch", deadline=None)
settings.load_profile("seamwatch")
# `scripts/test --fast` loads this profile: a fifth of each property test's examples (see
# tests/support/examples.py); the full run keeps the profile above and each test's own count.
settings.register_profile("fast", max_examples=20, deadline=None)

BENCH_TESTS = Path(__file__).resolve().parent / "bench"
# The fixtures that start lab servers: a scenario's run, the lab's SDK server alone.
LAB_FIXTURES = frozenset({"lab_runs", "lab_server"})
# The fixture that starts a JVM running Spark in local mode.
SPARK_FIXTURE = "spark"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a lab server is a lab test, one that asks for a Spark session a
    spark test; every test of tests/bench/ is a bench test."""
    for item in items:
        if LAB_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.lab)
        if SPARK_FIXTURE in item.fixturenames:
            item.add_marker(pytest.mark.spark)
        if item.path.is_relative_to(BENCH_TESTS):
            item.add_marker(pytest.mark.bench)


@pytest.fixture(scope="session")
def lab_runs(tmp_path_factory: pytest.TempPathFactory) -> LabRuns:
    """The lab runs of the test session: each scenario at most once, whichever test asks first."""
    return LabRuns(tmp_path_factory.mktemp("lab"))


@pytest.fixture(autouse=True)
def _proxy_tier(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets `tests.support.proxy` start the proxy only in a test of the `proxy` or `lab` tier."""
    proxy.tier_marked = any(request.node.get_closest_marker(m) for m in ("proxy", "lab"))
    yield
    proxy.tier_marked = False


@pytest.fixture(autouse=True)
def _main_module() -> Iterator[None]:
    """Puts back the test process's `__main__` after each test: Streamlit's `AppTest` leaves
    the script it ran there, and a process started by spawn after it (the parse's pool, a
    spawned child) would run that script first and die, the pool's reads falling back silently
    to one process."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main
