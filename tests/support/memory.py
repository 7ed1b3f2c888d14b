"""Peak memory of one call, as tracemalloc sees it (Python allocations: what a decoder holds)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable


def traced_peak[T](call: Callable[[], T]) -> tuple[T, int]:
    """`call()`'s result and the peak of the bytes Python held while it ran."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
