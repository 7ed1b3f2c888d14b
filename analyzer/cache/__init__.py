"""The cache beside the capture: each input's normalized tables (`analyzer.cache.entries`) and
the timeline frames an analysis of them collected (`analyzer.cache.frames`), both published
by one commit logic (`analyzer.cache.commit`: staged, synced, renamed into place; one sweep).
"""

from analyzer.cache.commit import sweep
from analyzer.cache.entries import (
    CACHE_DIR,
    NORMALIZING_CODE,
    CacheEntry,
    EntryBuilder,
    build_entry,
    digests,
    file_digest,
    find_entry,
    input_key,
    read_through,
)
from analyzer.cache.frames import FrameWriter, frame_set, read_frames

__all__ = [
    "CACHE_DIR",
    "NORMALIZING_CODE",
    "CacheEntry",
    "EntryBuilder",
    "FrameWriter",
    "build_entry",
    "digests",
    "file_digest",
    "find_entry",
    "frame_set",
    "input_key",
    "read_frames",
    "read_through",
    "sweep",
]
