"""RFC 8785 JSON Canonicalization Scheme (JCS): one text, and one hash, per JSON value.

Spec: https://www.rfc-editor.org/rfc/rfc8785

Two deliberate deviations, both for values the RFC does not admit at all (it requires I-JSON,
RFC 7493), so that text seen in the wild still gets a stable, collision-free key:

- Python `int`s are written as their exact decimal text. §3.2.2.3 would first turn them into an
  IEEE 754 double, and JSON-RPC ids beyond 2**53 do occur: rounding would make two distinct ids
  one. A `float` is still written the ECMAScript way, so `10**21` gives "1000000000000000000000"
  and `1e21` gives "1e+21". Below 2**53 an integral float and the int agree ("7").
- Strings holding a lone surrogate (which Python's `json` happily decodes from "\\ud800") are
  written as they are; the text then has no UTF-8 form, and `canonical_hash` hashes it with the
  "surrogatepass" error handler instead of failing. Callers that must reject such values test
  `canonical_json(v).encode("utf-8")`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from json.encoder import encode_basestring

__all__ = ["canonical_hash", "canonical_json"]

# Below 2**53 every integer is a double and its shortest round-trip digits are its own digits,
# so an integral float there is written as the int it equals (the common case: ids, counts).
_EXACT_INT_LIMIT = 2.0**53

# A container being written: its remaining (text before, value) pairs, its closing bracket, and
# its id(), held in `open_ids` so that a cycle is an error instead of an endless loop.
_Frame = tuple[Iterator[tuple[str, object]], str, int]


def canonical_json(value: object) -> str:
    """Return the RFC 8785 canonical text of a JSON value (dict, list, str, int, float, bool, None).

    Raises ValueError for NaN, infinities, cycles and ints longer than
    `sys.get_int_max_str_digits()`; TypeError for anything else JSON cannot express (a set,
    bytes, a dict key that is not a str).
    Tuples are taken as arrays. Iterative, so nesting depth is bounded by memory only.
    """
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    out: list[str] = []
    stack: list[_Frame] = []
    open_ids: set[int] = set()
    current = value
    while True:
        scalar = _scalar(current)
        if scalar is not None:
            out.append(scalar)
        elif isinstance(current, dict):
            if current:
                # §3.2.3: members sorted by key; the key's escaped form is what gets written.
                stack.append((_members(current), "}", _enter(open_ids, current)))
            else:
                out.append("{}")
        elif isinstance(current, list | tuple):
            if current:
                stack.append((_elements(current), "]", _enter(open_ids, current)))
            else:
                out.append("[]")
        else:
            raise TypeError(f"not a JSON value: {type(current).__name__}")
        # Find the next value to write, closing every container that has run out.
        while stack:
            step = next(stack[-1][0], None)
            if step is None:
                _, closer, container_id = stack.pop()
                open_ids.discard(container_id)
                out.append(closer)
                continue
            out.append(step[0])
            current = step[1]
            break
        else:
            return "".join(out)


def canonical_hash(value: object) -> str:
    """Return the first 16 hex digits of the SHA-256 of the canonical text's UTF-8 bytes."""
    # "surrogatepass" only changes anything for a lone surrogate (see the module docstring); the
    # bytes it gives are never valid UTF-8, so they cannot collide with a well-formed text.
    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


def _scalar(value: object) -> str | None:
    """Return the canonical text of a non-container value, None for a dict, list or tuple."""
    # bool before int: bool is an int subclass.
    if isinstance(value, str):
        # §3.2.2.2: escape only '"', '\\' and the C0 controls, as \b \t \n \f \r or \u00xx in
        # lowercase hex; everything else is written as itself. The stdlib's non-ASCII string
        # encoder does exactly this (and ignores U+007F and U+2028 as the RFC does).
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        # int.__repr__, not str(): an IntEnum or other subclass must not change the text.
        return int.__repr__(value)
    if isinstance(value, float):
        return _number(float(value))
    return None


def _number(x: float) -> str:
    """Serialize a double as ECMAScript's Number::toString does (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(x):
        raise ValueError(f"{x!r} is not a JSON number")
    if x == 0:
        return "0"  # "If m is +0 or -0, return '0'."
    if x.is_integer() and -_EXACT_INT_LIMIT < x < _EXACT_INT_LIMIT:
        return int.__repr__(int(x))
    # repr() gives the shortest digits that round-trip, choosing the closest such value: the
    # same k and s that ECMA-262 Number::toString step 5 asks for. Only the layout differs.
    text = repr(x)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    # n such that x = 0.<digits> * 10**n, in ECMA-262's terms x = s * 10**(n - k).
    n = len(whole) + (int(exponent) if exponent else 0) - (len(digits) - len(significant))
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        # "the k digits of the decimal representation of s, followed by n - k occurrences of 0"
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        # "the most significant n digits ... followed by '.', followed by the remaining k - n"
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        # "'0', followed by '.', followed by -n occurrences of 0, followed by the k digits"
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exp = f"e+{e}" if e > 0 else f"e-{-e}"
    if k == 1:
        return sign + digits + exp
    return sign + digits[0] + "." + digits[1:] + exp


def _enter(open_ids: set[int], container: object) -> int:
    """Mark a container as being written; raise ValueError if it already is (a cycle)."""
    container_id = id(container)
    if container_id in open_ids:
        raise ValueError("circular reference")
    open_ids.add(container_id)
    return container_id


def _elements(array: list[object] | tuple[object, ...]) -> Iterator[tuple[str, object]]:
    """Yield an array's elements in order, each with the text written before it."""
    opener = "["
    for element in array:
        yield opener, element
        opener = ","


def _members(obj: dict[object, object]) -> Iterator[tuple[str, object]]:
    """Yield an object's members in §3.2.3 order, each with the text written before its value."""
    opener = "{"
    for key in _sorted_keys(obj):
        yield f"{opener}{encode_basestring(key)}:", obj[key]
        opener = ","


def _sorted_keys(obj: dict[object, object]) -> list[str]:
    """Return the keys of a JSON object in §3.2.3 order: by their UTF-16 code units."""
    keys: list[str] = []
    ascii_only = True
    for key in obj:
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
        ascii_only = ascii_only and key.isascii()
        keys.append(key)
    if ascii_only:
        keys.sort()
    else:
        # Code point order differs from UTF-16 order once a key holds a character past U+FFFF
        # (encoded D800-DFFF) next to one in U+E000-U+FFFF; big-endian bytes compare as units.
        keys.sort(key=_utf16_units)
    return keys


def _utf16_units(key: str) -> bytes:
    """Sort key comparing strings by UTF-16 code units."""
    return key.encode("utf-16-be", "surrogatepass")
