"""analyzer.cache.entries: the Parquet cache beside the capture, keyed, private, published
atomically."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from analyzer.cache import CACHE_DIR, build_entry, find_entry, input_key
from analyzer.cache import entries as cache
from tests.support.disk import fill, small_disk


def _file(tmp_path: Path, name: str = "c.jsonl", data: bytes = b"x\n") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _key(path: Path, **kw: str | None) -> str:
    options: dict[str, str | None] = {"replica_header": None, "client_header": None, **kw}
    return input_key("capture", [path], **options)  # type: ignore[arg-type]


def test_key_follows_size_mtime_and_options(tmp_path: Path) -> None:
    path = _file(tmp_path)
    key = _key(path)
    assert key == _key(path)
    assert key != _key(path, replica_header="X-Served-By")
    assert _key(path, replica_header="X-Served-By") == _key(path, replica_header="x-served-by")
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 1))
    assert key != _key(path)
    path.write_bytes(b"xy\n")
    assert len({key, _key(path)}) == 2


def test_key_follows_the_normalizing_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "analyzer"
    for name in cache.NORMALIZING_CODE:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(cache.__file__).parents[1] / name, copy / name)
    digest = cache._source_digest(copy)
    assert digest == cache._code_digest()
    with (copy / "sse.py").open("a", encoding="utf-8") as source:
        source.write("# a parser fix\n")
    assert cache._source_digest(copy) != digest
    path = _file(tmp_path)
    key = _key(path)
    monkeypatch.setattr(cache, "_code_digest", lambda: "another parser")
    assert _key(path) != key


# Imported by the readers, yet deciding nothing a normalized table holds: the package's version,
# the cache itself (its layout is `_ENTRY_FORMAT`), the input reports, temporary folders, the
# capture package's exports, and the proxy's capture writer, its files, its retention, record
# models and redaction (readers write, delete, validate and redact nothing).
_NOT_NORMALIZING = {
    "__init__.py",
    "cache/__init__.py",
    "cache/commit.py",
    "cache/entries.py",
    "cache/frames.py",
    "inputs.py",
    "memory.py",
    "scratch.py",
    "capture/__init__.py",
    "capture/files.py",
    "capture/redaction.py",
    "capture/retention.py",
    "capture/writer.py",
    "record_models.py",
}


def test_every_module_the_readers_import_is_in_the_key() -> None:
    probe = (
        "import sys, analyzer.ingest, analyzer.ingest.jsonl, analyzer.ingest.har, "
        "analyzer.ingest.mitm\n"
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('analyzer')))"
    )
    root = Path(cache.__file__).parents[1]
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root.parent,  # this source tree's package, whatever is installed
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    imported = {Path(line).relative_to(root).as_posix() for line in done.stdout.splitlines()}
    assert "normalize/normalizer.py" in imported and "ingest/mitm.py" in imported
    assert imported - _NOT_NORMALIZING == set(cache.NORMALIZING_CODE)


def test_entry_is_private_and_found_after_commit(tmp_path: Path) -> None:
    path = _file(tmp_path)
    key = _key(path)
    assert find_entry(path, key) is None
    builder = build_entry(path, key)
    (builder.directory / "flows-a.parquet").write_bytes(b"")
    entry = builder.commit({"report": {"records": 1}})
    root = tmp_path / CACHE_DIR
    assert entry.directory.parent == root
    assert root.stat().st_mode & 0o777 == 0o700
    assert entry.directory.stat().st_mode & 0o777 == 0o700
    assert (entry.directory / "manifest.json").stat().st_mode & 0o777 == 0o600
    found = find_entry(path, key)
    assert found is not None and found.cached and found.manifest["report"] == {"records": 1}
    assert not entry.cached


def test_new_entry_replaces_the_old_one_of_the_same_input(tmp_path: Path) -> None:
    path = _file(tmp_path)
    old = build_entry(path, _key(path)).commit({})
    other = _file(tmp_path, "other.jsonl")
    kept = build_entry(other, _key(other)).commit({})
    path.write_bytes(b"changed\n")
    new = build_entry(path, _key(path)).commit({})
    assert new.directory.exists() and kept.directory.exists()
    assert not old.directory.exists()


def test_unwritable_folder_falls_back_to_a_private_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    blocker = _file(tmp_path, "not-a-dir")
    monkeypatch.setattr(cache, "_cache_root", lambda _: blocker / CACHE_DIR)
    builder = build_entry(path, _key(path))
    entry = builder.commit({})
    assert not str(entry.directory).startswith(str(tmp_path))
    assert entry.directory.stat().st_mode & 0o777 == 0o700
    assert str(entry.directory) in cache._temp_dirs


def test_use_cache_false_never_touches_the_capture_folder(tmp_path: Path) -> None:
    path = _file(tmp_path)
    build_entry(path, _key(path), use_cache=False).commit({})
    assert not (tmp_path / CACHE_DIR).exists()


def test_stale_temporary_folders_are_swept(tmp_path: Path) -> None:
    path = _file(tmp_path)
    root = tmp_path / CACHE_DIR
    root.mkdir()
    stale = root / ".tmp-dead"
    stale.mkdir()
    old = time.time() - 7200
    os.utime(stale, (old, old))
    fresh = root / ".tmp-alive"
    fresh.mkdir()
    build_entry(path, _key(path)).abandon()
    assert not stale.exists() and fresh.exists()


def _committed(tmp_path: Path) -> tuple[Path, str, Path]:
    path = _file(tmp_path)
    key = _key(path)
    entry = build_entry(path, key).commit({"report": {"records": 1}})
    assert find_entry(path, key) is not None
    return path, key, entry.directory


def test_a_cache_others_can_write_to_is_not_read_and_is_made_private(tmp_path: Path) -> None:
    path, key, _ = _committed(tmp_path)
    root = tmp_path / CACHE_DIR
    root.chmod(0o777)  # anyone could have planted an entry under a key they can compute
    assert find_entry(path, key) is None
    build_entry(path, key).commit({})  # this user's next analysis takes the folder back
    assert root.stat().st_mode & 0o777 == 0o700
    assert find_entry(path, key) is not None


def test_an_entry_others_can_write_to_is_not_read(tmp_path: Path) -> None:
    path, key, directory = _committed(tmp_path)
    directory.chmod(0o757)
    assert find_entry(path, key) is None


def test_a_symlinked_cache_folder_is_neither_read_nor_written(tmp_path: Path) -> None:
    capture, elsewhere = tmp_path / "capture", tmp_path / "elsewhere"
    capture.mkdir()
    elsewhere.mkdir(mode=0o700)
    path = _file(capture)
    key = _key(path)
    (capture / CACHE_DIR).symlink_to(elsewhere)
    entry = build_entry(path, key).commit({})
    assert not any(elsewhere.iterdir())  # fell back to a private temporary folder
    assert str(entry.directory) in cache._temp_dirs
    assert find_entry(path, key) is None


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_an_entry_of_another_user_is_not_read(tmp_path: Path) -> None:
    path, key, directory = _committed(tmp_path)
    os.chown(directory, 65534, 65534)
    assert find_entry(path, key) is None


def _with_parts(tmp_path: Path) -> tuple[Path, str, Path]:
    path = _file(tmp_path)
    key = _key(path)
    builder = build_entry(path, key)
    for name in ("flows-a.parquet", "events-a.parquet"):
        (builder.directory / name).write_bytes(name.encode() * 100)
    directory = builder.commit({"report": {"records": 1}}).directory
    assert find_entry(path, key) is not None
    return path, key, directory


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda d: (d / "events-a.parquet").write_bytes(b"x" * 1500), "does not match"),
        (lambda d: (d / "events-a.parquet").unlink(), "events-a.parquet is missing"),
        (lambda d: (d / "events-b.parquet").write_bytes(b"planted"), "is not its own"),
    ],
    ids=["changed", "missing", "planted"],
)
def test_an_entry_whose_parts_are_not_those_it_lists_is_set_aside(
    tmp_path: Path, damage: Callable[[Path], object], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, key, directory = _with_parts(tmp_path)
    damage(directory)
    assert find_entry(path, key) is None
    assert said in caplog.text and "parsing again" in caplog.text
    assert not directory.exists()  # out of the way of the new entry, swept later
    assert [p.name[:13] for p in (tmp_path / CACHE_DIR).iterdir()] == [".tmp-damaged-"]
    build_entry(path, key).commit({"report": {"records": 2}})
    found = find_entry(path, key)
    assert found is not None and found.manifest["report"] == {"records": 2}


def test_an_entry_without_its_list_of_parts_is_not_read(tmp_path: Path) -> None:
    path, key, directory = _with_parts(tmp_path)
    manifest = directory / "manifest.json"
    manifest.write_text(json.dumps({"key": key, "report": {}}), "utf-8")
    assert find_entry(path, key) is None


def _settled_parts(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A folder of two parts last written a minute ago (settled: their digests are kept)."""
    folder = tmp_path / "entry"
    folder.mkdir()
    parts = [folder / "a.parquet", folder / "b.parquet"]
    for n, part in enumerate(parts):
        part.write_bytes(bytes([n]) * 4096)
        then = time.time() - 60
        os.utime(part, (then, then))
    return folder, parts


def _counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    hashed: list[str] = []
    real = cache.file_digest

    def counting(path: Path) -> str:
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(cache, "file_digest", counting)
    return hashed


def test_digests_hash_a_settled_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, parts = _settled_parts(tmp_path)
    hashed = _counting_hashes(monkeypatch)
    first = cache.digests(folder)
    assert sorted(hashed) == ["a.parquet", "b.parquet"]
    assert first == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in parts}
    assert (folder / cache.VERIFIED).stat().st_mode & 0o777 == 0o600
    hashed.clear()
    assert cache.digests(folder) == first
    assert hashed == []


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.write_bytes(b"\xff" * 4096),  # damaged in place: same size
        lambda p: os.utime(p, (time.time() - 30, time.time() - 30)),  # touched
        lambda p: os.replace(shutil.copy2(p, p.with_suffix(".tmp")), p),  # same mtime
    ],
    ids=["written", "touched", "replaced by a copy"],
)
def test_digests_hash_again_a_file_changed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], object]
) -> None:
    folder, (a, _) = _settled_parts(tmp_path)
    first = cache.digests(folder)
    change(a)
    hashed = _counting_hashes(monkeypatch)
    again = cache.digests(folder)
    assert hashed == ["a.parquet"]
    assert again["a.parquet"] == hashlib.sha256(a.read_bytes()).hexdigest()
    assert again["b.parquet"] == first["b.parquet"]


def test_digests_keep_nothing_of_a_file_just_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written within the clock's grain of a later write, its mtime could not tell them apart.
    folder, (a, _) = _settled_parts(tmp_path)
    a.write_bytes(b"new")
    cache.digests(folder)
    hashed = _counting_hashes(monkeypatch)
    cache.digests(folder)
    assert hashed == ["a.parquet"]
    assert list(json.loads((folder / cache.VERIFIED).read_text())) == ["b.parquet"]


@pytest.mark.parametrize("text", ["{", "[]", '{"a.parquet": [1, 2]}', '{"a.parquet": "x"}'])
def test_digests_hash_every_file_when_their_record_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    folder, _ = _settled_parts(tmp_path)
    (folder / cache.VERIFIED).write_text(text)
    hashed = _counting_hashes(monkeypatch)
    cache.digests(folder)
    assert sorted(hashed) == ["a.parquet", "b.parquet"]
    assert sorted(json.loads((folder / cache.VERIFIED).read_text())) == ["a.parquet", "b.parquet"]


def test_digests_when_their_record_cannot_be_written(tmp_path: Path) -> None:
    folder, parts = _settled_parts(tmp_path)
    (folder / cache.VERIFIED).mkdir()  # in the way of the record: it is not written
    expected = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in parts}
    assert cache.digests(folder) == expected
    assert cache.digests(folder) == expected
    assert sorted(p.name for p in folder.iterdir()) == ["a.parquet", "b.parquet", cache.VERIFIED]


FIXTURE = Path(__file__).parents[1] / "fixtures" / "dashboard" / "round-robin-replicas" / "capture"


def _capture(folder: Path) -> Path:
    """A real capture (a lab scenario's) in `folder`, made for the test."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in FIXTURE.glob("*.jsonl"):
        shutil.copy(f, folder / f.name)
    return folder


def _analyze(path: Path, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, Any]:
    """`seamwatch analyze --format json`: its exit code and report; what it said on stderr is
    kept in `_said`."""
    from analyzer.cli import main

    code = main(["analyze", "--format", "json", *more, str(path)])
    out, err = capsys.readouterr()
    _said[:] = err.splitlines()
    return code, json.loads(out)


_said: list[str] = []


def _rot(part: Path) -> None:
    """Damage a file in place as bit rot does: inode, size and mtime unchanged."""
    st = part.stat()
    with part.open("r+b") as fh:
        fh.seek(4)
        fh.write(b"\xff" * 64)
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert part.stat().st_ino == st.st_ino and part.stat().st_size == st.st_size


def test_bit_rot_the_stamps_hide_is_set_aside_when_reading_fails(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(cache, "_SETTLED_NS", 0)  # remember digests at once, not after 2 s
    folder = _capture(tmp_path / "cap")
    expected = _analyze(folder, capsys)
    assert _analyze(folder, capsys) == expected  # from the cache: verified.json is written
    (entry,) = (p for p in (folder / CACHE_DIR).iterdir() if not p.name.startswith("."))
    for stored in entry.glob("timeline-*"):
        shutil.rmtree(stored)  # so that the normalized parts themselves are read
    (flows,) = entry.glob("flows-*.parquet")
    _rot(flows)
    caplog.clear()
    assert _analyze(folder, capsys) == expected
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said[0].startswith("reading the cache failed (parquet: ")
    assert said[0].endswith("): checking it in full")
    assert said[1].endswith(f"({flows.name} does not match its SHA-256): parsing again")
    assert [p.name[:13] for p in (folder / CACHE_DIR).iterdir() if p.name.startswith(".")] == [
        ".tmp-damaged-"
    ]


def test_a_full_disk_while_caching_falls_back_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    here = _capture(tmp_path / "here")
    expected = json.dumps(_analyze(here, capsys, "--no-cache")).replace(str(here), "CAP")
    with small_disk(tmp_path / "disk", "256k") as disk:
        folder = _capture(disk / "cap")
        fill(disk)
        caplog.clear()
        assert json.dumps(_analyze(folder, capsys)).replace(str(folder), "CAP") == expected
    (said,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == (
        f"{folder}: cannot write the cache in {folder / CACHE_DIR} (No space left on device): "
        "reading without it"
    )
    assert _said == [f"seamwatch: warning: {said}"]  # one line on stderr


def test_the_cache_deleted_while_an_analysis_parses_is_parsed_around(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from analyzer.analysis import load_timeline

    folder = _capture(tmp_path / "cap")
    expected = _analyze(folder, capsys, "--no-cache")
    shutil.rmtree(folder / CACHE_DIR, ignore_errors=True)

    def delete_the_cache(path: str, done: int, total: int) -> None:
        shutil.rmtree(folder / CACHE_DIR, ignore_errors=True)  # "may be deleted at any time"

    timeline = load_timeline(
        [folder],
        replica_header=None,
        client_header=None,
        use_cache=True,
        on_progress=delete_the_cache,
    )
    assert [i.records for i in timeline.inputs] == [i["records"] for i in expected[1]["inputs"]]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [
        f"{folder}: cannot write the cache in {folder / CACHE_DIR} (No such file or directory): "
        "reading without it"
    ]
