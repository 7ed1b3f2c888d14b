"""Hypothesis example counts that follow the loaded profile: the full run keeps each test's own
count, `scripts/test --fast` (profile `fast`) runs a fifth of it."""

from __future__ import annotations

from typing import Final

from hypothesis import settings

# The `max_examples` of Hypothesis's default profile: the count each test names is meant for it.
_DEFAULT: Final = 100
# At least this many examples (or the test's own count if smaller) under any profile.
_FLOOR: Final = 10


def examples(n: int) -> int:
    """`n` under the default profile; under another, `n` scaled by its `max_examples`."""
    return max(min(n, _FLOOR), n * settings.default.max_examples // _DEFAULT)
