"""The cache entries of normalized tables, beside the capture (DESIGN.md §4).

Layout: a `.seamwatch-cache/` folder (mode 0700) in the capture directory, or in the folder of
a single capture, dump or HAR file, holding one entry folder per input:

    .seamwatch-cache/<input name>-<path hash 8>-<key 16>/
        manifest.json                  the key, the input report, each part's SHA-256
        verified.json                  the parts hashed before, with their inode, size, mtime
        flows-<part>.parquet ...       RAW_FLOWS       (analyzer.schema)
        events-<part>.parquet ...      RAW_EVENTS
        messages-<part>.parquet ...    RAW_MESSAGES
        tools-<part>.parquet ...       RAW_TOOLS
        payloads-<part>.parquet ...    PAYLOADS        (payload text lives only here)
        timeline-<key 16>/             the timeline's collected frames of an analysis whose
                                       first input this is (analyzer.cache.frames)

Files are 0600. The key hashes every input file's name, size and mtime, the capture schema, the
source of the code that normalizes (`NORMALIZING_CODE`) with the Polars version, and the options
that change normalization (replica and client header), so a grown `.partial`, a changed parser
or another option gives a new entry; older entries of the same input are removed when a new one
is written. An entry is built in a `.tmp-*` folder and renamed into place once complete
(`analyzer.cache.commit`), so a reader never sees half an entry. An entry is read only when its
parts are exactly those its manifest lists, each with its SHA-256: Parquet reads a part damaged
in place without complaint, as other values. A part an earlier analysis hashed is not hashed
again unless written to since (`digests`): damage that keeps a file's inode, size and mtime (bit
rot) is found only when reading it fails, and then `read_through` runs the analysis again with
every part hashed in full. A damaged entry is set aside (a `.tmp-*` folder, swept later), a
warning names it, and the input is parsed again. When the folder is not writable, or writing to
it fails (a full disk, the folder deleted meanwhile), a private temporary folder is used instead
and removed at exit: no cache, same result, and a warning says so.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import polars as pl

from analyzer.cache.commit import Staging, sweep
from analyzer.records import SCHEMA
from analyzer.scratch import scratch_prefix

__all__ = [
    "CACHE_DIR",
    "NORMALIZING_CODE",
    "CacheEntry",
    "build_entry",
    "digests",
    "file_digest",
    "find_entry",
    "input_key",
    "read_through",
]

log = logging.getLogger(__name__)

CACHE_DIR = ".seamwatch-cache"
MANIFEST = "manifest.json"
VERIFIED = "verified.json"
# A digest is remembered only for a file last written this long before it was hashed: any later
# write then gives the file another mtime, however coarse the file system's clock (a write in
# the same tick as the one hashed would keep it).
_SETTLED_NS = 2_000_000_000
# The entry's own layout (manifest and parts), in the key: entries of another layout are never
# found (2: the manifest lists each part's SHA-256).
_ENTRY_FORMAT = 2
_PROBE_BYTES = 64 * 1024
NORMALIZING_CODE: Final = (
    "canonical.py",
    "capture/framing.py",
    "capture/recorder.py",
    "ingest/__init__.py",
    "ingest/bulk.py",
    "ingest/common.py",
    "ingest/har.py",
    "ingest/jsonl.py",
    "ingest/lines.py",
    "ingest/mitm.py",
    "jsonrpc.py",
    "normalize/__init__.py",
    "normalize/columns.py",
    "normalize/describe.py",
    "normalize/flow.py",
    "normalize/handlers.py",
    "normalize/normalizer.py",
    "records.py",
    "schema/__init__.py",
    "schema/dtypes.py",
    "schema/tables.py",
    "schema/timeline.py",
    "sse.py",
)
"""The modules (under `analyzer/`) whose code decides what an input's normalized tables hold:
their source is in the key, so a parser fix heals cached captures by itself, as a change to the
timeline's code does its stored frames (`analyzer.cache.frames`)."""
_temp_dirs: list[str] = []
# Set by `read_through` after a read from the cache failed: hash every part in full.
_distrust_stamps = False


def _remove_temp_dirs() -> None:
    for path in _temp_dirs:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_temp_dirs)


@cache
def _code_digest() -> str:
    """`_source_digest` of the analyzer package: read once a process."""
    return _source_digest(Path(__file__).parents[1])


def _source_digest(root: Path) -> str:
    """SHA-256 of the Polars version and the source of `NORMALIZING_CODE` under `root`."""
    digest = hashlib.sha256(pl.__version__.encode())
    for name in NORMALIZING_CODE:
        digest.update(name.encode())
        digest.update((root / name).read_bytes())
    return digest.hexdigest()


def input_key(
    kind: str,
    files: Sequence[Path],
    *,
    replica_header: str | None,
    client_header: str | None,
) -> str:
    """The cache key of an input: what, if changed, would change its normalized tables."""
    stats = []
    for path in files:
        st = path.stat()
        stats.append([path.name, st.st_size, st.st_mtime_ns])
    ingredients = {
        "code": _code_digest(),
        "entry_format": _ENTRY_FORMAT,
        "capture_schema": SCHEMA,
        "kind": kind,
        "files": stats,
        "replica_header": replica_header.lower() if replica_header else None,
        "client_header": client_header.lower() if client_header else None,
    }
    text = json.dumps(ingredients, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cache_root(path: Path) -> Path:
    return (path if path.is_dir() else path.parent) / CACHE_DIR


def _ours(folder: Path) -> bool:
    """Whether a folder is a real directory of this user that nobody else can write to.

    Only such a folder is read as cache: whoever can write into it could plant an entry under
    a key anyone can compute (names, sizes and mtimes) and forge an analysis.
    """
    try:
        st = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _identity(path: Path) -> str:
    """`<name>-<hash of the absolute path>`: names the entries of one input."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", path.resolve().name)[:48] or "input"
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    return f"{name}-{digest}"


@dataclass(frozen=True)
class CacheEntry:
    """A folder of normalized tables and the manifest describing them."""

    directory: Path
    manifest: dict[str, Any]
    cached: bool  # True when found complete on disk (not parsed by this run)


def find_entry(path: Path, key: str) -> CacheEntry | None:
    """The complete cache entry of this input and key, if any."""
    root = _cache_root(path)
    directory = root / f"{_identity(path)}-{key}"
    if not (_ours(root) and _ours(directory)):
        return None
    try:
        manifest = json.loads((directory / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        return None
    damage = _damage(directory, manifest)
    if damage is not None:
        log.warning("%s: cache entry %s is damaged (%s): parsing again", path, directory, damage)
        _set_aside(root, directory)
        return None
    return CacheEntry(directory, manifest, cached=True)


def file_digest(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def digests(directory: Path) -> dict[str, str]:
    """Each Parquet file of a folder (an entry's parts, a stored timeline set) by name, with its
    SHA-256 (two files at a time: hashing releases the GIL).

    A file hashed by an earlier call is not hashed again while its inode, size and mtime are
    those it had then (`verified.json` in the folder remembers them, as git's index does): any
    write to a file changes its mtime, so a part damaged in place is still found, for one hash
    of each file instead of one per analysis (on a large capture, hashing its parts would be a
    large share of every analysis from the cache). Only a file last written `_SETTLED_NS` before
    it was hashed is remembered.
    """
    parts = sorted(directory.glob("*.parquet"))
    stamps = {p.name: _stamp(p) for p in parts}  # before hashing: a later write changes them
    known = {} if _distrust_stamps else _remembered(directory)
    found = {p.name: known[p.name][3] for p in parts if known.get(p.name, [])[:3] == stamps[p.name]}
    todo = [p for p in parts if p.name not in found]
    with ThreadPoolExecutor(max_workers=2) as pool:
        found.update(zip((p.name for p in todo), pool.map(file_digest, todo), strict=True))
    settled = time.time_ns() - _SETTLED_NS
    remember = {n: [*stamps[n], found[n]] for n in sorted(found) if stamps[n][2] < settled}
    if remember != known:
        _remember(directory, remember)
    return {name: found[name] for name in sorted(found)}


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _remembered(directory: Path) -> dict[str, list[Any]]:
    """The files `digests` hashed before: name -> [inode, size, mtime_ns, SHA-256]."""
    try:
        known = json.loads((directory / VERIFIED).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(known, dict):
        return {}
    return {
        name: entry
        for name, entry in known.items()
        if isinstance(entry, list)
        and len(entry) == 4
        and all(type(v) is int for v in entry[:3])
        and isinstance(entry[3], str)
    }


def _remember(directory: Path, known: dict[str, list[Any]]) -> None:
    """Replace `verified.json` (best effort: a folder that cannot be written hashes again)."""
    try:
        fd, temp = tempfile.mkstemp(prefix=".verified-", dir=directory)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(known, fh, sort_keys=True)
        os.replace(temp, directory / VERIFIED)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _damage(directory: Path, manifest: dict[str, Any]) -> str | None:
    """What is wrong with an entry's parts (None when they are those its manifest lists)."""
    listed = manifest.get("parts")
    if not isinstance(listed, dict):
        return "no list of parts"
    try:
        found = digests(directory)
    except OSError as e:
        return f"unreadable: {e.strerror or e}"
    for name in sorted(set(listed) | set(found)):
        if name not in found:
            return f"{name} is missing"
        if name not in listed:
            return f"{name} is not its own"
        if found[name] != listed[name]:
            return f"{name} does not match its SHA-256"
    return None


@contextlib.contextmanager
def _hashing_in_full() -> Iterator[None]:
    global _distrust_stamps
    before, _distrust_stamps = _distrust_stamps, True
    try:
        yield
    finally:
        _distrust_stamps = before


def read_through[T](load: Callable[[bool], T], *, use_cache: bool = True) -> T:
    """`load(use_cache)`, that reads inputs through the cache; when reading the cache fails
    (a part damaged where its stamps do not show it, the folder deleted meanwhile), once more
    with every part hashed in full, so a damaged entry is set aside and parsed again, and at
    last without the cache. A warning says each retry; a failure without the cache is raised."""
    if not use_cache:
        return load(False)
    try:
        return load(True)
    except (OSError, pl.exceptions.PolarsError) as e:
        if not _of_the_cache(e):
            raise
        log.warning("reading the cache failed (%s): checking it in full", _one_line(e))
    try:
        with _hashing_in_full():
            return load(True)
    except (OSError, pl.exceptions.PolarsError) as e:
        if not _of_the_cache(e):
            raise
        log.warning("reading the cache failed again (%s): reading without it", _one_line(e))
    return load(False)


def _of_the_cache(error: OSError | pl.exceptions.PolarsError) -> bool:
    """Whether a failure may come from the cache: a Polars error (reading a Parquet part says
    not which file), or an OSError on a file inside a cache folder. An input that cannot be
    read is not retried: it fails in one line at once."""
    if isinstance(error, OSError):
        return CACHE_DIR in Path(str(error.filename or "")).parts
    return True


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _set_aside(root: Path, directory: Path) -> None:
    """Move a damaged entry out of the way (a `.tmp-*` name: swept later), so that its input's
    new entry can take its place; an analysis still reading it keeps its open files."""
    try:
        os.rename(directory, tempfile.mkdtemp(prefix=".tmp-damaged-", dir=root))
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)


class EntryBuilder:
    """A folder to write an entry's tables into, published by `commit`."""

    def __init__(self, path: Path, key: str, *, use_cache: bool) -> None:
        self.path = path
        self.key = key
        self.root: Path | None = None
        self.staging: Staging | None = None
        self.directory = self._make_directory(use_cache)

    def _make_directory(self, use_cache: bool) -> Path:
        if use_cache:
            root = _cache_root(self.path)
            try:
                root.mkdir(mode=0o700, exist_ok=True)
                if not root.is_symlink() and root.stat().st_uid == os.getuid():
                    root.chmod(0o700)  # a folder made by hand, or by an older version
                if not _ours(root):
                    raise PermissionError(f"{root} is not a private folder of this user")
                sweep(root)
                self.staging = Staging.start(root)
            except OSError:
                pass
            else:
                self.root = root
                return self.staging.path
        directory = Path(tempfile.mkdtemp(prefix=scratch_prefix("tables")))
        _temp_dirs.append(str(directory))
        return directory

    def commit(self, manifest: dict[str, Any]) -> CacheEntry:
        """Write the manifest and move the entry into place (or keep the temporary folder)."""
        manifest = {**manifest, "key": self.key, "parts": digests(self.directory)}
        if self.root is None or self.staging is None:
            target = self.directory / MANIFEST
            target.write_text(json.dumps(manifest, indent=1, sort_keys=True), "utf-8")
            os.chmod(target, 0o600)
            return CacheEntry(self.directory, manifest, cached=False)
        identity = _identity(self.path)
        final = self.root / f"{identity}-{self.key}"
        self.staging.seal(MANIFEST, manifest, indent=1)
        try:
            self.staging.publish(final)
        except OSError:
            # Another analysis published the same entry first (or the rename failed): ours
            # is equivalent; read it from where it is and let the sweep collect it later.
            if find_entry(self.path, self.key) is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
                return CacheEntry(final, manifest, cached=False)
            _temp_dirs.append(str(self.directory))
            return CacheEntry(self.directory, manifest, cached=False)
        for other in self.root.iterdir():
            if other.name.startswith(identity + "-") and other != final:
                shutil.rmtree(other, ignore_errors=True)
        return CacheEntry(final, manifest, cached=False)

    def abandon(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def trouble(self) -> str | None:
        """Why the cache folder cannot take more (gone, full, read-only), or None when a 64 KiB
        file can still be written there (or no cache folder is used): after a failed parse,
        whether the cache or the input is to blame."""
        if self.root is None:
            return None
        try:
            fd, probe = tempfile.mkstemp(prefix=".tmp-probe-", dir=self.root)
            try:
                os.write(fd, bytes(_PROBE_BYTES))
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as e:
            return e.strerror or str(e)
        return None


def build_entry(path: Path, key: str, *, use_cache: bool = True) -> EntryBuilder:
    """Start a new entry for this input: a folder to write parts into, then `commit`."""
    return EntryBuilder(path, key, use_cache=use_cache)
