"""The matrix's axes, one variant per combination, and a per-seed sampler (pure functions).

A variant is one session's wire choices around one cut: the client reads `seen` messages of a
stream (a `tools/call` stream whose response is still owed, or the standalone GET stream, which
owes none), closes the connection, and resumes with `Last-Event-ID`; the server answers the
resume as `answer` says. The 2026-07-28 era has no resume: its client re-issues the call under a
new id (`answer="reissue"`). Four families put the fault elsewhere than in the resume's answer
(`FAMILIES`, drawn in turn with the answers): the client resumes after its session was
DELETEd, resumes a GET stream after opening a newer one, or carries its cursor into a new
session, or the server delivers a POST's response on the GET stream. Combinations a protocol
cannot produce are not variants (`valid`): a cursor needs an event id before the cut, so eras
without a priming event need `seen >= 1`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields

#: Event-id schemes: `17`, `evt-000123`, `<stream>_<n>`, UUID, `<stream>_<epoch-ms>_<rand>`, one id.
ID_SCHEMES = ("counter", "padded", "stream", "uuid", "epoch", "constant")
#: Schemes whose ids number the stream's events (DESIGN.md §5 `causal-gap`: per-stream counters).
COUNTER_SCHEMES = frozenset({"counter", "padded", "stream"})
#: Messages the client saw before the cut: only the priming event, one, two, many.
SEEN = (0, 1, 2, 5)
#: What the stream carries: progress with `total`, progress without it, `notifications/message`.
PROGRESS = ("total", "bare", "none")
#: How the resume is answered.
ANSWERS = (
    "full",  # everything after the cursor, on the resumed stream
    "tail-unseen",  # a ring buffer's surviving tail; evicted events include unseen ones
    "tail-seen",  # a ring buffer that evicted only what the client had: a complete replay
    "fresh",  # a fresh stream under new ids, nothing replayed
    "restart",  # a fresh stream from a collected buffer: its id counter starts again
    "other-payloads",  # the due ids, carrying other messages
    "answer-twice",  # the full replay, then a second, different response to the same request
    "empty",  # 200 and an event stream that ends without an event
    "stall",  # 200 and only a new priming event (2025-11-25), every time
    "404",  # session not found: the client re-initializes
    "409",  # conflict: the client cancels and re-issues
    "honest-new",  # 200 and a control event `resumed: false`: the client cancels, re-issues
    "honest-error",  # 400 telling the client to re-establish without Last-Event-ID
)
REISSUE = "reissue"  # 2026-07-28: no resume; the client re-issues under a new id
#: Faults outside the resume's answer (each resume in them is answered with the full replay).
FAMILIES = (
    "after-delete",  # the client DELETEs the session, which lives on, then resumes
    "superseded",  # the client opens a newer GET stream, then resumes the older one
    "carried-cursor",  # the client re-initializes and sends its old cursor in the new session
    "response-on-get",  # the call's stream ends without its response; the GET stream carries it
)
#: Every kind of fault, in the order `sample` draws them.
KINDS = (*ANSWERS, REISSUE, *FAMILIES)
#: Whose cursor the client resumes from: the last id it read, or the one before (it had not
#: handled the last message when the connection went).
CURSORS = ("last", "lagging")
#: Who answers the resume: the replica that issued the cursor, another one named by
#: `X-Served-By`, or another one with no header on any response (nothing identifies it).
REPLICAS = ("same", "other", "hidden")
SESSIONED_ERAS = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN_ERA = "2026-07-28"
ERAS = (*SESSIONED_ERAS, MODERN_ERA)
#: How the server writes the body: one event a chunk, several, a chunk cut mid-line, gzip.
CHUNKINGS = ("one", "several", "midline", "gzip")
#: The tool called: side-effecting (no annotations) or read-only.
TOOLS = ("create_ticket", "slow_report")
#: Who cuts the stream: the client closes it; or the server ends it after `retry:` (2025-11-25)
#: and the client waits that long before it resumes; or resumes at once (too early).
CUTS = ("client", "server", "early")
#: The `retry:` (ms) a server that ends the stream sends on its priming event, by cut: short
#: where the client waits it (a later resume is never wrong), long where it comes back at once,
#: so that "at once" stays inside it on a loaded machine (a prompt resume through the proxy
#: has come more than a second after the end there; `retry-violation` flags under 90%).
RETRY_MS = {"server": 250, "early": 4000}
#: Messages the stream carries after the cut, before its response.
AFTER_CUT = 4


@dataclass(frozen=True)
class Variant:
    """One combination of the axes (module docstring)."""

    ids: str
    seen: int
    progress: str
    answer: str
    owed: bool
    cursor: str
    replica: str
    era: str
    chunking: str
    tool: str
    cut: str = "client"

    @property
    def name(self) -> str:
        """A stable name from the axes (`mx-<8 hex>`); the client's clientInfo name."""
        text = json.dumps(asdict(self), sort_keys=True)
        return "mx-" + hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def priming(self) -> bool:
        """Whether streams open with a priming event (2025-11-25 only, DESIGN.md §1)."""
        return self.era == "2025-11-25"

    @property
    def side_effecting(self) -> bool:
        return self.tool == "create_ticket"

    def axes_text(self) -> str:
        """The axes on one line, for the report."""
        owed = "response-owed" if self.owed else "get-stream"
        return (
            f"era={self.era} ids={self.ids} seen={self.seen} progress={self.progress} "
            f"answer={self.answer} {owed} cursor={self.cursor} replica={self.replica} "
            f"chunking={self.chunking} tool={self.tool} cut={self.cut}"
        )

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Variant:
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise ValueError(f"variant keys {sorted(data)} are not {sorted(names)}")
        variant = cls(**data)  # type: ignore[arg-type]
        if not valid(variant):
            raise ValueError(f"not a valid variant: {variant}")
        return variant


def valid(v: Variant) -> bool:
    """Whether the protocol can produce this combination, each axis value named once."""
    domains = (
        (v.ids, ID_SCHEMES),
        (v.seen, SEEN),
        (v.progress, PROGRESS),
        (v.answer, KINDS),
        (v.owed, (True, False)),
        (v.cursor, CURSORS),
        (v.replica, REPLICAS),
        (v.era, ERAS),
        (v.chunking, CHUNKINGS),
        (v.tool, TOOLS),
        (v.cut, CUTS),
    )
    if not all(value in domain for value, domain in domains):
        return False
    if v.era == MODERN_ERA:
        # No resume, no cursor, no session: the family is "cut, then re-issue".
        return (
            v.answer == REISSUE
            and v.owed
            and v.seen >= 1
            and (v.cursor, v.replica, v.cut) == ("last", "same", "client")
        )
    if v.answer == REISSUE:
        return False
    if v.answer == "superseded" and v.owed:
        return False  # a newer GET stream replaces only a GET stream
    if v.answer == "carried-cursor" and v.cut != "client":
        return False  # no resume in the cursor's own session, so no wait to honour
    if v.answer == "response-on-get" and (
        not v.owed or (v.cursor, v.cut, v.replica) != ("last", "client", "same")
    ):
        return False  # no cut, no resume: only the call and the GET stream
    if v.cut != "client" and not v.priming:
        return False  # the `retry:` rides on the priming event
    if not v.owed and (v.progress != "none" or v.tool != "slow_report"):
        return False  # the GET stream answers no request: no progress, no tool
    # The cursor is the last id the client read, or the one before it: it must exist.
    ids_before_cut = v.seen + (1 if v.priming else 0)
    if ids_before_cut < (2 if v.cursor == "lagging" else 1):
        return False
    if v.answer == "answer-twice" and not v.owed:
        return False  # the GET stream answers no request
    if v.answer == "stall" and not v.priming:
        return False  # without priming events a stalled answer is an empty one
    # One id for every event: the server cannot tell a lagging cursor from the last one.
    return not (v.ids == "constant" and v.cursor == "lagging")


def _axes() -> tuple[tuple[object, ...], ...]:
    return (
        ID_SCHEMES,
        SEEN,
        PROGRESS,
        KINDS,
        (True, False),
        CURSORS,
        REPLICAS,
        ERAS,
        CHUNKINGS,
        TOOLS,
        CUTS,
    )


def all_variants() -> Iterator[Variant]:
    """Every valid variant, in axis order (nightly-sized: tens of thousands)."""
    for values in itertools.product(*_axes()):
        variant = Variant(*values)  # type: ignore[arg-type]
        if valid(variant):
            yield variant


def sample(count: int, seed: int) -> list[Variant]:
    """`count` distinct valid variants, the same for the same seed.

    Stratified on the fault: the i-th variant's resume answer (the 2026 re-issue, a family) is
    the i-th of `KINDS` in turn, so a sample of `len(KINDS)` covers every kind; the other
    axes are drawn uniformly among the combinations that stay valid.
    """
    rng = random.Random(seed)
    chosen: list[Variant] = []
    names: set[str] = set()
    attempts = 0
    while len(chosen) < count:
        attempts += 1
        if attempts > 1000 * max(count, 1):
            raise ValueError(f"cannot draw {count} distinct variants")
        kind = KINDS[len(chosen) % len(KINDS)]
        values = [rng.choice(axis) for axis in _axes()]
        values[3] = kind
        if kind == REISSUE:
            values[4], values[5], values[6], values[7] = True, "last", "same", MODERN_ERA
            values[10] = "client"
        elif kind == "response-on-get":
            values[4], values[5], values[6], values[10] = True, "last", "same", "client"
            values[7] = rng.choice(SESSIONED_ERAS)
        else:
            values[7] = rng.choice(SESSIONED_ERAS)
        if values[4] is False:
            values[2], values[9] = "none", "slow_report"
        variant = Variant(*values)  # type: ignore[arg-type]
        if valid(variant) and variant.name not in names:
            names.add(variant.name)
            chosen.append(variant)
    return chosen
