"""One local SparkSession for the Spark engine's tests (it takes seconds to start)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A `local[2]` SparkSession whose workers run this interpreter; the tests that take it are
    skipped, with one line, where Java is not installed."""
    if shutil.which("java") is None:
        pytest.skip("Java 17 is not installed: the Spark engine cannot start")
    from analyzer.spark.engine import session

    spark = session("local[2]", app="seamwatch-tests")
    yield spark
    spark.stop()
