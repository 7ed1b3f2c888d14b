"""What each variant must make the analysis say, derived from the injected fault (DESIGN.md §5).

`expected(variant)` is a rule table over what the fault does to what the client saw; it never
looks at analyzer output. Each rule names the detectors it requires (`required`), the groups of
which one must fire where §5 lets either name the loss (`any_of`), and the ones the fault may
legitimately add (`allowed`); every other detector is forbidden at medium or above, and a
variant that expects nothing must have no resumption finding at all (`lab.verdict.judge`).

Two facts decide whether a loss is visible on the wire at all, and so whether it can be
required (a loss the capture holds no trace of is `allowed`, never required):

- something was due after the cursor (`due_visible`): the stream still owed its response, or
  the client had read an event past its cursor (a lagging cursor);
- a skip shows (`skip_visible`, §5 `causal-gap`): progress, with or without `total`, after at
  least one notification before the cut (with none, where progress started is unknown), or
  per-stream counter ids with at least two numbered events before the cut.

Chunking and gzip never change the expected set. The families outside the resume's answer
(`FAMILIES`) answer every resume with the full replay, so what they expect is their own fault's
detector plus what a full replay expects (replica, cut, constant ids).
"""

from __future__ import annotations

from lab.framework import Expected
from lab.matrix.variants import AFTER_CUT, COUNTER_SCHEMES, FAMILIES, MODERN_ERA, Variant

#: Answers after which the client learns the cursor was not honoured and starts over.
HONEST = frozenset({"404", "409", "honest-new", "honest-error"})
#: Answers with a 2xx status (a resume answered, whatever it carried).
ANSWERED_2XX = frozenset(
    {
        "full",
        "after-delete",
        "superseded",
        "answer-twice",
        "tail-unseen",
        "tail-seen",
        "fresh",
        "restart",
        "other-payloads",
        "empty",
        "stall",
        "honest-new",
    }
)
#: Answers that replay the rest of the stream, its response included when owed.
COMPLETE_OR_TAIL = frozenset(
    {"full", "after-delete", "superseded", "answer-twice", "tail-seen", "tail-unseen"}
)
LOSS = ["lost-response", "causal-gap"]


def due_visible(v: Variant) -> bool:
    """Whether the capture shows that something was due after the cursor."""
    return v.owed or v.cursor == "lagging"


def skip_visible(v: Variant) -> bool:
    """Whether a replay that skips unseen events shows as a skip (module docstring)."""
    if v.owed and v.progress != "none" and v.seen >= 1:
        return True  # the step: from `total`, or the smallest increment on any incarnation
    numbered_before_cut = v.seen + (1 if v.priming else 0)
    return v.ids in COUNTER_SCHEMES and numbered_before_cut >= 2


def cursor_number(v: Variant) -> int:
    """The counter value of the client's cursor (counter schemes number the priming event)."""
    last = v.seen + (1 if v.priming else 0)
    return last if v.cursor == "last" else last - 1


def reissues(v: Variant) -> bool:
    """Whether the client sends the call again after the fault (a correct client does, once
    told the stream is gone, or in 2026 after its stream broke)."""
    return v.owed and (v.answer in HONEST or v.era == MODERN_ERA)


def payloads_per_session(v: Variant) -> list[int]:
    """Distinct non-priming payloads each session of the variant carries on the wire."""
    full_call = v.seen + AFTER_CUT + 1  # a re-issued call runs to its end, no cut
    if v.era == MODERN_ERA:
        return [v.seen + full_call]  # one client key: the cut call and its re-issue
    if v.answer == "carried-cursor":
        return [v.seen, 0]  # the new session only sends the old cursor, refused
    first = (
        v.seen
        + {
            "full": AFTER_CUT + v.owed,
            "after-delete": AFTER_CUT + v.owed,
            "superseded": 1 + AFTER_CUT,  # the newer GET stream's message, then the replay
            "response-on-get": 1 + AFTER_CUT + 1,  # the GET stream's message, the response
            "answer-twice": AFTER_CUT + 2,
            "tail-seen": AFTER_CUT + v.owed,
            "tail-unseen": AFTER_CUT - 2 + v.owed,
            "fresh": 1,  # the fresh stream's message
            "restart": 1,
            "other-payloads": AFTER_CUT + v.owed + (v.cursor == "lagging"),
            "empty": 0,
            "stall": 0,  # new priming events only
            "404": 0,
            "409": 0,
            "honest-new": 1,  # the control event
            "honest-error": 0,
        }[v.answer]
    )
    if v.answer == "404":
        return [first, full_call if v.owed else 1]  # re-initialized: a second session
    if v.answer in HONEST:
        first += full_call if v.owed else (0 if v.answer == "409" else 1)
    return [first]


def expected(v: Variant) -> Expected:
    """The variant's expected detectors (module docstring)."""
    required: set[str] = set()
    any_of: list[list[str]] = []
    allowed: set[str] = set()
    if reissues(v) and v.side_effecting:
        # The first call's stream broke and no result came: the re-issue may run it twice.
        required.add("repeated-tool-call")
    if v.ids == "constant" and max(payloads_per_session(v)) >= 2:
        # One id for different messages: the uniqueness MUST of §1 is broken by the scheme.
        required.add("duplicate-event-id")
    if v.era == MODERN_ERA:
        # Closing a 2026 stream is its cancellation: nothing was lost to the client.
        return _expected(required, any_of, allowed)
    if v.cut == "early":
        # The server ended the stream after `retry:`; the client came back at once.
        required.add("retry-violation")
    answer = v.answer
    if answer in FAMILIES:
        _family(v, required, any_of, allowed)
    if answer == "answer-twice":
        # One request id answered twice with different results, on its stream's incarnation.
        required.add("duplicate-response")
    elif answer == "tail-unseen":
        # Events the client never saw were evicted: the replay is a surviving tail.
        (required if skip_visible(v) else allowed).add("causal-gap")
        if not v.owed and v.cursor == "lagging":
            # The event read past the cursor was evicted too, and no response ties the tail to
            # the stream. Nor do its ids: a session-wide counter's (`17`, `evt-000017`) go on
            # past the cursor on a fresh stream as well, and `<stream>_<n>` reads the same as
            # long as the GET stream is the session's only stream with ids: whether a prefix
            # names the stream or the session shows only where another stream of the session
            # carries ids of its own. On the wire the tail is a fresh answer.
            allowed.add("phantom-resume")
    elif answer in ("fresh", "restart", "other-payloads"):
        (required if due_visible(v) else allowed).add("phantom-resume")
        if answer == "restart" and v.ids in COUNTER_SCHEMES:
            # The counter starts again on the resumed stream: its message takes the first
            # message's number, and from a cursor past 1 the counter runs backwards.
            if v.seen >= 1:
                required.add("duplicate-event-id")
            (required if cursor_number(v) >= 2 else allowed).add("counter-reset")
        if answer == "other-payloads" and v.cursor == "lagging":
            # The event read past the cursor comes back under its id with another message.
            required.add("duplicate-event-id")
        if v.owed:
            any_of.append(LOSS)  # the response never comes
        else:
            allowed.add("causal-gap")  # the carried events never come again
    elif answer in ("empty", "stall"):
        # Nothing came, and the client resumed again, five times: a loop while a response is
        # owed, and the response is lost. No event is not a phantom; a new priming event alone
        # moves the cursor past what never came, which phantom-resume may name.
        if v.owed:
            required.add("resume-loop")
            any_of.append(LOSS)
        else:
            allowed.add("causal-gap")
        if answer == "stall":
            allowed.add("phantom-resume")
    elif answer in HONEST:
        # Told: an error status or a control event. The client starts over; what the stream
        # carried after the cursor is gone, and the server said so.
        allowed.add("causal-gap")
        if answer == "404":
            allowed.add("lost-response")  # the session ended before the client could cancel
    if v.replica == "other" and answer in ANSWERED_2XX:
        delivered_response = v.owed and answer in COMPLETE_OR_TAIL
        if not delivered_response:
            # A replica other than the cursor's answered 2xx; only the header tells (§5).
            required.add("cross-replica-resume")
    return _expected(required, any_of, allowed)


def _family(v: Variant, required: set[str], any_of: list[list[str]], allowed: set[str]) -> None:
    """What a family's own fault expects (`FAMILIES`); its resume, if any, is a full replay."""
    if v.answer == "after-delete":
        # The DELETE was answered 2xx, and the resume after it too (§5).
        required.add("resume-after-termination")
    elif v.answer == "superseded" and v.ids == "constant":
        # The newer stream issued the one id last, and a cursor resolves to its latest issue
        # before the resume (§2): on the wire the client resumed the newer stream, which it
        # had closed itself (no `retry:` wait owed either).
        required.discard("retry-violation")
        allowed.update({"superseded-stream", "retry-violation"})
    elif v.answer == "superseded":
        # The client resumed the older GET stream after a newer one replaced it (§5).
        required.add("superseded-stream")
    elif v.answer == "carried-cursor":
        # A cursor only the old session issued, sent in the new one (§5: which session).
        required.add("stale-cursor")
        if v.owed:
            # The client left the old session with the call's stream cut, resumed it nowhere
            # and cancelled nothing: its response never came (§5 `lost-response`).
            any_of.append(LOSS)
        else:
            allowed.add("causal-gap")  # what the GET stream carried after the cut never came
    else:
        # The GET stream opened a stream of its own; the response belongs on the POST's (§1).
        required.add("response-on-get-stream")


def _expected(required: set[str], any_of: list[list[str]], allowed: set[str]) -> Expected:
    named = required | {d for group in any_of for d in group}
    return Expected(
        required=sorted(required),
        any_of=[sorted(group) for group in any_of],
        allowed=sorted(allowed - named),
    )
