"""Total classifier of JSON-RPC 2.0 messages, as MCP Streamable HTTP carries them.

Spec: https://www.jsonrpc.org/specification (§4 Request, §4.1 Notification, §5 Response,
§5.1 Error, §6 Batch) and the MCP "Base Protocol" page. Any input gives exactly one `Kind` and
`classify` never raises: malformed input is data, and `reason` says what was wrong with it.

Decisions the specs leave open, made here on purpose:

- A request whose id is null is a REQUEST with `id == "null"`. JSON-RPC 2.0 allows it ("The
  use of Null ... is discouraged"); MCP forbids it ("the ID MUST NOT be null"), which is for a
  detector to report, not for the classifier to hide.
- A UTF-8 byte order mark before the text is skipped and the rest classified. RFC 8259 §8.1:
  parsers "MAY ignore the presence of a byte order mark rather than treating it as an error".
- `"params": null` is taken as absent (the MCP SDKs accept it); any other non-structured
  `params` makes the message INVALID "bad-params-type" (JSON-RPC §4.2).
- `error` only has to be an object: a missing or non-integer `code` is for a detector to report.
- An object holding both `method` and `result`/`error` is INVALID "method-with-result-or-error".
- Numbers that overflow a double ("1e400") are INVALID "number-out-of-range" (I-JSON, RFC 7493
  §2.2); ints are exact, ids beyond 2**53 stay distinct (see `analyzer.canonical`).
- "lone-surrogate" covers every string and key of a message, not only `method` and `id`: an
  unpaired UTF-16 surrogate has no UTF-8 form, so it cannot reach a Parquet or Arrow column.
  Only texts holding a "\\ud"/"\\uD" escape (or, given as str, a literal surrogate) pay for
  the check; `classify_value` always does, with one C-speed re-encoding of the value.
- `classify_value` also meets what no JSON text can make: NaN and infinite floats
  ("nan-or-infinity"), ints past 4300 digits ("number-too-long"), sets, bytes or cycles
  ("not-json-value"). Dict keys are not checked: `json` itself writes int keys as strings.
- Nesting is "too-deep" where CPython's own limit stops `json` (about 1500 levels in 3.12).
- Batches are classified although MCP 2025-06-18 dropped them: old peers still send them.
- INVALID objects keep their `id` and `method` when those are well-typed, so that a detector can
  still pair a malformed request with its response.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

import orjson

from analyzer.canonical import canonical_json

__all__ = [
    "Kind",
    "Message",
    "Reason",
    "classify",
    "classify_sorted",
    "classify_value",
    "iter_messages",
    "may_hold_float",
]


class Kind(StrEnum):
    """What a JSON-RPC message is; every input has exactly one."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR = "error"
    BATCH = "batch"
    INVALID = "invalid"


class Reason(StrEnum):
    """Why a message is INVALID: short, stable text meant for a column."""

    NOT_UTF8 = "not-utf8"
    NOT_JSON = "not-json"
    NAN_OR_INFINITY = "nan-or-infinity"
    NUMBER_TOO_LONG = "number-too-long"
    NUMBER_OUT_OF_RANGE = "number-out-of-range"
    TOO_DEEP = "too-deep"
    LONE_SURROGATE = "lone-surrogate"
    NOT_JSON_VALUE = "not-json-value"
    NOT_AN_OBJECT = "not-an-object"
    EMPTY_BATCH = "empty-batch"
    NESTED_BATCH = "nested-batch"
    MISSING_JSONRPC = "missing-jsonrpc"
    BAD_JSONRPC_VERSION = "bad-jsonrpc-version"
    BAD_ID_TYPE = "bad-id-type"
    BAD_METHOD_TYPE = "bad-method-type"
    BAD_PARAMS_TYPE = "bad-params-type"
    METHOD_WITH_RESULT_OR_ERROR = "method-with-result-or-error"
    BOTH_RESULT_AND_ERROR = "both-result-and-error"
    BAD_ERROR_TYPE = "bad-error-type"
    MISSING_ID = "missing-id"
    NO_METHOD_RESULT_OR_ERROR = "no-method-result-or-error"


@dataclass(frozen=True, slots=True)
class Message:
    """One classified JSON-RPC message, or a batch of them."""

    kind: Kind
    id: str | None = None
    """The id as canonical JSON text, keeping its type: 7 -> "7", "7" -> '"7"', null -> "null";
    None when absent (or, in an INVALID message, not a string, number or null)."""
    method: str | None = None
    """The method of a request or notification (kept in an INVALID one when it is a string)."""
    reason: str | None = None
    """Why the message is INVALID (a `Reason`); None for every other kind."""
    members: tuple[Message, ...] = ()
    """For a BATCH, each element classified in order (any may be INVALID); empty otherwise."""
    value: object = field(default=None, hash=False)
    """The parsed JSON value; None when the text did not parse."""


def classify(raw: bytes | str) -> Message:
    """Classify one HTTP body or SSE `data` payload holding a JSON-RPC message or batch."""
    return classify_sorted(raw)[0]


def classify_sorted(raw: bytes | str) -> tuple[Message, bytes | None]:
    """`classify(raw)`, and orjson's compact text of the value with sorted keys when it is at
    hand and surely holds no float (else None): the RFC 8785 text of the value, unless a key
    holds a character past U+FFFF (see `analyzer.normalize.fast_canonical_hash`)."""
    if isinstance(raw, str):
        text = raw
        # A str can carry a surrogate code point literally, not only as a \u escape.
        suspect = not raw.isascii() and not _encodes_as_utf8(raw)
    else:
        try:
            text = str(raw, "utf-8")
        except UnicodeDecodeError:
            return _INVALID_NOT_UTF8, None
        suspect = False
    if text.startswith("\ufeff"):
        text = text[1:]
    if not suspect:
        # The fast path: orjson parses what `json` parses to the same value, and refuses (so
        # the full path below says why) NaN, infinite numbers, lone surrogates, depth past
        # 1024 and control characters. It reads ints outside [-2**63, 2**64) as floats: when
        # the text may hold such an int and the value a float, ask `json` instead.
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            try:
                compact: bytes | None = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError:  # nested past orjson's 254 levels of output
                compact = None
            if compact is not None and not may_hold_float(compact):
                return _classify_top(value, False), compact
            # Here the value may hold a float (sorting keys moves no token), or is too deep to
            # be written by orjson, so unsure: trust it only if no int can have overflowed.
            if not _may_hold_big_int(text):
                return _classify_top(value, False), None
    return _classify_text(text, suspect), None


def may_hold_float(compact: bytes) -> bool:
    """False only when orjson's compact output `compact` surely holds no float (else maybe).

    Every float orjson writes is a digit run followed by '.', 'e' or 'E' ("1.5", "1e+16",
    "-0.0"), and in compact output a number token starts the text or follows ':', ',' or '['
    (no whitespace). Such a run inside a string ("v1.2", "tick 0.5") is no float token unless
    one of those three characters comes right before it ("a:1.5"): then it says maybe.
    """
    # The quoted "2.0" (a whole string: in compact JSON a quote never touches a digit
    # otherwise) sits in every message; removing it leaves most texts without any digit run
    # followed by a float mark, and the few that hold one are looked at where it starts.
    marked = compact.replace(b'"2.0"', b"").translate(_FLOAT_MARKS)
    hit = marked.find(b"DF")
    while hit >= 0:
        start = hit
        while start > 0 and marked[start - 1] == _D:
            start -= 1
        if start > 0 and marked[start - 1] == _MINUS:
            start -= 1
        if start == 0 or marked[start - 1] in _VALUE_OPENERS:
            return True
        hit = marked.find(b"DF", hit + 2)
    return False


def _may_hold_big_int(text: str) -> bool:
    """False only when the JSON text surely holds no number token of 19 digits or more.

    Every int outside [-2**63, 2**64) has that many. A number token starts the text or follows
    ':', ',' or '[' (a member's value, an array element) with only RFC 8259 whitespace between,
    then an optional '-'; a 19-digit run inside a string ("at 1750000204842821421") is skipped
    unless such a character comes right before it ("a:1750000204842821421"): then maybe.
    """
    zeroed = text.encode("utf-8").translate(_DIGITS_TO_ZERO)
    hit = zeroed.find(_DIGIT_RUN)
    while hit >= 0:
        before = hit - 1
        # A run longer than 38 digits is found again mid-run: its start was looked at.
        if before < 0 or zeroed[before] != _ZERO:
            if before >= 0 and zeroed[before] == _MINUS:
                before -= 1
            while before >= 0 and zeroed[before] in _JSON_SPACE:
                before -= 1
            if before < 0 or zeroed[before] in _VALUE_OPENERS:
                return True
        hit = zeroed.find(_DIGIT_RUN, hit + len(_DIGIT_RUN))
    return False


def _classify_text(text: str, suspect: bool) -> Message:
    """The full path of `classify`, on `json`: it tells why a text is no JSON-RPC message."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError:
        return _INVALID_NOT_JSON
    except _NonFiniteConstant:
        return _INVALID_NAN_OR_INFINITY
    except _FloatOverflow:
        return _INVALID_NUMBER_OUT_OF_RANGE
    except ValueError:
        # The scanner's only other ValueError: an int past sys.get_int_max_str_digits() (4300).
        return _INVALID_NUMBER_TOO_LONG
    except RecursionError:
        return _INVALID_TOO_DEEP
    # Python's json decodes "\ud800" to a lone surrogate, and only such an escape makes one in
    # a text that was valid UTF-8. Substring tests keep the full check off the hot path: the
    # first is a memchr, the others are scalar scans paid only by texts holding a backslash
    # (false hits such as "\ud7ff" or "\\ud" only cost the check).
    suspect = suspect or ("\\" in text and ("\\ud" in text or "\\uD" in text))
    return _classify_top(value, suspect)


def classify_value(value: object) -> Message:
    """Classify an already parsed JSON value (checked as strictly as `classify` checks text)."""
    defect = _defect(value)
    if defect is None:
        return _classify_top(value, suspect=False)
    if isinstance(value, list) and value:
        # Pin the defect on the members that hold it; the others classify as usual.
        return _classify_top(value, suspect=True)
    return Message(Kind.INVALID, reason=defect, value=value)


def iter_messages(message: Message) -> Iterator[Message]:
    """Yield a batch's members, or the message itself when it is not a batch."""
    if message.kind is Kind.BATCH:
        yield from message.members
    else:
        yield message


class _NonFiniteConstant(Exception):
    """NaN, Infinity or -Infinity: Python's json extension, not JSON (RFC 8259 §6)."""


class _FloatOverflow(Exception):
    """A number literal too large for a double, which float() would turn into inf."""


def _reject_constant(name: str) -> object:
    raise _NonFiniteConstant(name)


def _parse_float(literal: str) -> float:
    number = float(literal)
    if math.isinf(number):
        raise _FloatOverflow(literal)
    return number


# Built once: json.loads() with hooks would build a new decoder for every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float)
# Only used to look for defects: non-finite floats, cycles and non-JSON types make it raise.
_PROBE = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_MISSING = object()
# A run of 19 digits may be an int outside [-2**63, 2**64), which orjson would make a float.
# (Found by mapping every digit to "0" and looking for 19 of them: faster than a regex.)
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_DIGIT_RUN = b"0" * 19
# Every float orjson writes has a digit followed by '.', 'e' or 'E' ("1.5", "1e+16", "5e-324");
# mapping digits to "D" and those three to "F" makes that one search for "DF".
_FLOAT_MARKS = bytes.maketrans(b"0123456789.eE", b"DDDDDDDDDDFFF")
_D = ord("D")
_ZERO = ord("0")
_MINUS = ord("-")
# What comes right before a number token (besides whitespace, in non-compact text).
_VALUE_OPENERS = frozenset(b":,[")
_JSON_SPACE = frozenset(b" \t\n\r")


def _invalid(reason: Reason) -> Message:
    return Message(Kind.INVALID, reason=reason)


_INVALID_NOT_UTF8 = _invalid(Reason.NOT_UTF8)
_INVALID_NOT_JSON = _invalid(Reason.NOT_JSON)
_INVALID_NAN_OR_INFINITY = _invalid(Reason.NAN_OR_INFINITY)
_INVALID_NUMBER_OUT_OF_RANGE = _invalid(Reason.NUMBER_OUT_OF_RANGE)
_INVALID_NUMBER_TOO_LONG = _invalid(Reason.NUMBER_TOO_LONG)
_INVALID_TOO_DEEP = _invalid(Reason.TOO_DEEP)


def _classify_top(value: object, suspect: bool) -> Message:
    """Classify a whole payload; `suspect` asks for a defect check of every element."""
    if isinstance(value, list):
        if not value:
            # §6: "an Array with at least one value"; "[]" gets a single Invalid Request error.
            return Message(Kind.INVALID, reason=Reason.EMPTY_BATCH, value=value)
        members = tuple([_classify_element(element, suspect, True) for element in value])
        return Message(Kind.BATCH, members=members, value=value)
    return _classify_element(value, suspect, False)


def _classify_element(value: object, suspect: bool, in_batch: bool) -> Message:
    if suspect:
        defect = _defect(value)
        if defect is not None:
            return Message(Kind.INVALID, reason=defect, value=value)
    if isinstance(value, dict):
        return _classify_object(value)
    if in_batch and isinstance(value, list):
        return Message(Kind.INVALID, reason=Reason.NESTED_BATCH, value=value)
    return Message(Kind.INVALID, reason=Reason.NOT_AN_OBJECT, value=value)


def _classify_object(obj: dict[str, object]) -> Message:
    """Classify one JSON-RPC object by the members §4 and §5 require."""
    raw_id = obj.get("id", _MISSING)
    id_text: str | None = None
    id_ok = True
    if raw_id is not _MISSING:
        # §4: id is "a String, Number, or NULL value if included". bool is not a Number.
        if raw_id is None or (
            isinstance(raw_id, str | int | float) and not isinstance(raw_id, bool)
        ):
            try:
                id_text = canonical_json(raw_id)
            except ValueError:  # non-finite or overlong: only reachable past _defect by a bug
                id_ok = False
        else:
            id_ok = False
    method = obj.get("method", _MISSING)
    method_text = method if isinstance(method, str) else None

    version = obj.get("jsonrpc", _MISSING)
    if version is _MISSING:
        return _bad(obj, Reason.MISSING_JSONRPC, id_text, method_text)
    if version != "2.0":
        # §4: "MUST be exactly '2.0'".
        return _bad(obj, Reason.BAD_JSONRPC_VERSION, id_text, method_text)
    if not id_ok:
        return _bad(obj, Reason.BAD_ID_TYPE, None, method_text)

    has_result = "result" in obj
    has_error = "error" in obj
    if method is not _MISSING:
        if method_text is None:
            return _bad(obj, Reason.BAD_METHOD_TYPE, id_text, None)
        if has_result or has_error:
            return _bad(obj, Reason.METHOD_WITH_RESULT_OR_ERROR, id_text, method_text)
        params = obj.get("params")
        if params is not None and not isinstance(params, dict | list):
            # §4.2: "If present, parameters for the rpc call MUST be provided as a Structured
            # value. Either by-position through an Array or by-name through an Object."
            return _bad(obj, Reason.BAD_PARAMS_TYPE, id_text, method_text)
        if raw_id is _MISSING:
            # §4.1: "A Notification is a Request object without an 'id' member."
            return _new_message(Kind.NOTIFICATION, None, method_text, obj)
        return _new_message(Kind.REQUEST, id_text, method_text, obj)

    if has_result and has_error:
        # §5: "Either the result member or error member MUST be included, but both members
        # MUST NOT be included."
        return _bad(obj, Reason.BOTH_RESULT_AND_ERROR, id_text, None)
    if not (has_result or has_error):
        return _bad(obj, Reason.NO_METHOD_RESULT_OR_ERROR, id_text, None)
    if raw_id is _MISSING:
        # §5: id "is REQUIRED"; null when the request's id could not be detected.
        return _bad(obj, Reason.MISSING_ID, None, None)
    if has_error:
        if not isinstance(obj["error"], dict):
            # §5.1: "the error member MUST be an Object".
            return _bad(obj, Reason.BAD_ERROR_TYPE, id_text, None)
        return _new_message(Kind.ERROR, id_text, None, obj)
    return _new_message(Kind.RESPONSE, id_text, None, obj)


def _message_factory() -> Callable[[Kind, str | None, str | None, object], Message]:
    """A positional constructor of valid Messages, faster than the frozen dataclass one.

    The generated __init__ of a frozen dataclass goes through object.__setattr__ per field;
    setting the slots through their descriptors skips that (as `analyzer.sse` does for events).
    Every field is set, so a Message built here equals one built by __init__ (tested).
    """
    new = object.__new__
    set_kind, set_id, set_method, set_reason, set_members, set_value = (
        getattr(Message, name).__set__
        for name in ("kind", "id", "method", "reason", "members", "value")
    )

    def new_message(kind: Kind, id: str | None, method: str | None, value: object) -> Message:
        message = new(Message)
        set_kind(message, kind)
        set_id(message, id)
        set_method(message, method)
        set_reason(message, None)
        set_members(message, ())
        set_value(message, value)
        return message

    return new_message


_new_message = _message_factory()


def _bad(
    obj: dict[str, object], reason: Reason, id_text: str | None, method: str | None
) -> Message:
    return Message(Kind.INVALID, id=id_text, method=method, reason=reason, value=obj)


def _defect(value: object) -> Reason | None:
    """Return why a parsed value is no valid JSON text's value, None when it is one."""
    try:
        text = _PROBE.encode(value)
    except RecursionError:
        return Reason.TOO_DEEP
    except (ValueError, TypeError):
        return _diagnose(value)
    if text.isascii() or _encodes_as_utf8(text):
        return None
    return Reason.LONE_SURROGATE


def _diagnose(value: object) -> Reason:
    """Name the defect that made the probe encoder fail (the rare, slow path)."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, str | bool):
            continue
        if isinstance(item, int):
            try:
                int.__repr__(item)
            except ValueError:
                return Reason.NUMBER_TOO_LONG
        elif isinstance(item, float):
            if not math.isfinite(item):
                return Reason.NAN_OR_INFINITY
        elif isinstance(item, dict | list | tuple):
            if id(item) in seen:
                continue  # shared or circular; a cycle ends up as NOT_JSON_VALUE below
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
        else:
            return Reason.NOT_JSON_VALUE
    return Reason.NOT_JSON_VALUE


def _encodes_as_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
