"""The tree's shape: every test file mirrors a source file (STYLE.md 10, as mitmproxy's
test/filename_matching.py holds it), save the few that test a whole rather than one module."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# Top-level packages beside analyzer/; any other folder of tests/ mirrors analyzer/.
PACKAGES = ("addons", "bench", "dashboards", "lab")
# A scenario's test sits in tests/lab/, its source in lab/scenarios/.
ALSO = {Path("lab"): Path("lab/scenarios")}

# Test files of a whole, each with the part of the tree it covers.
WHOLES = {
    "tests/test_tree.py": "the tree itself",
    "tests/addons/test_decode_bounds.py": "the proxy and the capture pipeline undoing codings",
    "tests/dashboards/test_browser.py": "the whole app in a browser",
    "tests/detectors/test_registry.py": "the registry, analyzer/detectors/__init__.py",
    "tests/ingest/test_overlap.py": "inputs that hold the same flows, across the readers",
    "tests/lab/test_expectations.py": "every scenario against its expected.json",
    "tests/timeline/test_goldens.py": "every timeline stage on the stored goldens",
}


def sources_of(test: Path) -> list[Path]:
    """The source files `tests/<folder>/test_<name>.py` may mirror."""
    folder = test.parent.relative_to(TESTS)
    name = test.stem.removeprefix("test_")
    if folder.parts and folder.parts[0] in PACKAGES:
        bases = [folder, *([ALSO[folder]] if folder in ALSO else [])]
    else:
        bases = [Path("analyzer", folder)]
    found = []
    for base in bases:
        found += [base / f"{name}.py", base / name / "__init__.py"]
        if name == "init":
            found.append(base / "__init__.py")
    return found


def test_every_test_file_mirrors_a_source_file() -> None:
    strays = []
    for test in sorted(TESTS.rglob("test_*.py")):
        key = test.relative_to(ROOT).as_posix()
        if key not in WHOLES and not any((ROOT / s).is_file() for s in sources_of(test)):
            strays.append(key)
    assert strays == [], "test files that mirror no source file (rename, or list in WHOLES)"


def test_every_listed_whole_exists() -> None:
    assert [key for key in WHOLES if not (ROOT / key).is_file()] == []


def test_a_stray_test_file_is_caught() -> None:
    assert not any((ROOT / s).is_file() for s in sources_of(TESTS / "timeline" / "test_nowhere.py"))
    assert ROOT / "analyzer/timeline/streams.py" in [
        ROOT / s for s in sources_of(TESTS / "timeline" / "test_streams.py")
    ]
