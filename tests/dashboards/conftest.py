"""Fixtures of the dashboard tests: the stored lab capture (copied), the planted capture, an app."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboards.launch import SOURCE_ENV, environment
from tests.support.planted import planted_capture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dashboard" / "round-robin-replicas"
APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"


@pytest.fixture(scope="session")
def lab_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the stored lab capture (the analyzer writes its cache beside it)."""
    target = tmp_path_factory.mktemp("lab") / "round-robin-replicas"
    shutil.copytree(FIXTURE, target)
    return target / "capture"


@pytest.fixture(scope="session")
def expected() -> dict[str, Any]:
    """The lab scenario's expected.json."""
    return dict(json.loads((FIXTURE / "expected.json").read_text("utf-8")))


@pytest.fixture(scope="session")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted-payload capture (tests/support/planted.py)."""
    return planted_capture(tmp_path_factory.mktemp("planted") / "capture")


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """Empty Streamlit's caches around a test: AppTest runs share this process's caches."""
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def make_app(monkeypatch: pytest.MonkeyPatch, source: Path | None, *more: Path) -> AppTest:
    """The dashboard as AppTest, started on `source` and `more` (or on none), as the launcher
    passes them."""
    paths = [] if source is None else [str(source), *map(str, more)]
    monkeypatch.delenv(SOURCE_ENV, raising=False)
    for name, value in environment(paths, {}).items():
        monkeypatch.setenv(name, value)
    return AppTest.from_file(str(APP), default_timeout=90)
