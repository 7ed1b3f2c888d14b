"""mitmdump script for tests: makes the capture path raise on a seeded set of chunks.

Loaded after the capture addon (`-s addons/seamwatch_capture.py -s tests/support/faulty_addon.py`);
it patches `StreamTap.feed`, the capture path's entry point, so that the chunks whose ordinals
(counted over the whole run) are in SEAMWATCH_TEST_FAULTS raise.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analyzer.capture.recorder import StreamTap

FAULTS = {int(n) for n in os.environ.get("SEAMWATCH_TEST_FAULTS", "").split(",") if n}
_feed = StreamTap.feed
_seen = [0]


def feed(self: StreamTap, raw: bytes) -> None:
    n = _seen[0]
    _seen[0] += 1
    if n in FAULTS:
        raise RuntimeError(f"injected capture fault on chunk {n}")
    _feed(self, raw)


StreamTap.feed = feed  # type: ignore[method-assign]
