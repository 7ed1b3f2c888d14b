"""mitmdump script for tests: makes the capture path raise on a seeded set of chunks.

Loaded after the capture addon (`-s addons/seamwatch_capture.py -s tests/support/faulty_addon.py`);
it patches `CaptureClient.chunk`, the proxy-side entry of the capture path, so that the chunks
whose ordinals (counted over the whole run) are in SEAMWATCH_TEST_FAULTS raise.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analyzer.capture.pipeline import CaptureClient

FAULTS = {int(n) for n in os.environ.get("SEAMWATCH_TEST_FAULTS", "").split(",") if n}
_chunk = CaptureClient.chunk
_seen = [0]


def chunk(self: CaptureClient, flow: str, raw: bytes) -> None:
    n = _seen[0]
    _seen[0] += 1
    if n in FAULTS:
        raise RuntimeError(f"injected capture fault on chunk {n}")
    _chunk(self, flow, raw)


CaptureClient.chunk = chunk  # type: ignore[method-assign]
