"""Fixtures of the report writer tests: a small hand-built report."""

from __future__ import annotations

import pytest

from analyzer.report import Report
from tests.support.report_sample import make_report


@pytest.fixture
def report() -> Report:
    return make_report()


@pytest.fixture
def empty_report() -> Report:
    return make_report([])
