"""Credential redaction, applied before a record is queued (DESIGN.md §4).

A secret is replaced by `[redacted:<hmac8>]`, the first 8 hex digits of HMAC-SHA256 under a
random per-capture key: equal secrets stay equal (so a replayed request still compares with its
original, and a token seen in a body matches the same token in an `Authorization` header), the
key is never written, and `key_id` (8 hex digits of its SHA-256) names it in `capture_open`.

Capture raw: `text` edits the secret values in place and leaves every other byte alone, never
re-serializing. Decisions, made here on purpose:

- Names match exactly, ignoring ASCII case, never by substring: `progressToken`, `maxTokens`
  and `tokens` are not secrets, and neither is a bare `token` (an MCP server may use it for
  anything). `"Password"` and `"API_KEY"` are.
- Headers: `Authorization` and `Proxy-Authorization` keep their scheme (`Bearer [redacted:..]`,
  RFC 9110 §11.4), cookies keep their names (`sid=[redacted:..]`, RFC 6265 §4.2.1) and a
  `Set-Cookie` its attributes, because sticky-session cookies are how replicas get picked. A
  JSON member of the same name follows the same rule. `X-Api-Key`, `Api-Key`, `X-Auth-Token`,
  `X-Access-Token` and `Authorization-Token` are in the default list beside the four DESIGN.md
  names, as JSON keys too (header maps carried in JSON).
- Header names may also be listed as a suffix pattern, `*-token`, `*-api-key`, `*-secret` by
  default: names are matched whole, and a header name is a label of its own (where a JSON key
  like `progressToken` is not), so `X-Csrf-Token` or `X-Amz-Security-Token` are credentials.
  Patterns never touch `Mcp-*` headers: the protocol's own (`Mcp-Param-Token` mirrors a body
  parameter that the analysis compares it with). Patterns apply to headers only, never to JSON.
- JSON, wherever it appears in the text (a body, SSE `data:` lines): a member whose name is
  listed has its string value redacted, and a number too (a numeric PIN is a secret; it becomes
  a string). `true`, `false` and `null` are left. Objects and arrays are not blanked but walked,
  as everything else is: a tool's JSON Schema describing a `password` property stays readable.
- JSON text carried inside a JSON string (an MCP tool result's `content[].text`) is redacted
  too, one level deep: `{"text": "{\\"password\\": \\"x\\"}"}`.
- A key spelled with JSON escapes (`"acc\\u0065ss_token"`) is decoded and matched, and its
  value still edited in place rather than the text re-serialized. That pass runs only when the
  text holds a `\\u00XX` escape of a character that some listed name contains, so Go's `\\u003c`
  or escaped non-ASCII text does not pay for it. It covers top-level JSON, not JSON in a string.
- A value cut short (a truncated body, an unterminated SSE tail) is redacted up to where it
  stops, so the head of a secret never leaks through a cap.
- `key=value` pairs led by `?` or `&` (a URL in a body, a query string) or opening the text (a
  form-encoded body) are redacted by the JSON key list, the value percent-decoded for the hash.
  A request's own query string is also redacted by a short list of its own (`token`, `key`,
  `code`, `apikey`): in a request target these are credentials (an API key, an OAuth
  authorization code), where as JSON keys they are not. They are not applied to URLs inside
  bodies: `code` and `token` are everywhere in JSON-RPC text, and the hot path's precheck would
  pay for it on every event.
- Empty values and values that are already redaction markers are left alone, so redacting twice
  changes nothing.
- Cost: text holding no listed name as a quoted key (`"name"`, `\\"name\\"`) nor, when it has an
  `=`, as a substring, and no such escape, comes back after one case fold and one regex scan
  led by a literal quote (about 4 µs per KiB here); the editing passes run only past that.

Not covered: a member split across two SSE `data:` lines, escaped key names inside JSON-in-a-
string, JSON two strings deep, key names percent-encoded in a query, and strings inside an array
held by a secret name (`"api_key": ["a", "b"]`); the JSON defaults name no OAuth `code`,
because JSON-RPC errors carry a numeric `code` (a request's query string does). The query list
is named in `capture_open`'s policy (`query_keys`, schema 1.1).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable, Sequence
from urllib.parse import unquote_plus

__all__ = [
    "DEFAULT_HEADERS",
    "DEFAULT_JSON_KEYS",
    "DEFAULT_QUERY_KEYS",
    "Redactor",
]

DEFAULT_HEADERS: tuple[str, ...] = (
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-access-token",
    "authorization-token",
    "*-token",
    "*-api-key",
    "*-secret",
)
"""Header names whose values are credentials (matched ignoring case); `*-x` is a suffix."""

DEFAULT_JSON_KEYS: tuple[str, ...] = (
    # OAuth 2.x (RFC 6749 §5.1, RFC 7591 §3.2.1, RFC 7636 §4.1, RFC 7523, RFC 8693)
    "access_token",
    "refresh_token",
    "id_token",
    "registration_access_token",
    "subject_token",
    "actor_token",
    "client_secret",
    "client_assertion",
    "code_verifier",
    # the same in camelCase, as JavaScript SDKs write them
    "accessToken",
    "refreshToken",
    "idToken",
    "clientSecret",
    # generic credentials
    "auth_token",
    "authToken",
    "session_token",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apiKey",
    "private_key",
    "privateKey",
    # header maps carried in JSON (a tool's HTTP request arguments)
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-access-token",
    "authorization-token",
)
"""JSON member names whose values are credentials (exact names, ignoring ASCII case)."""

DEFAULT_QUERY_KEYS: tuple[str, ...] = ("token", "key", "code", "apikey")
"""Query parameter names redacted in a request target, beside the JSON key list."""

# Header name patterns never apply to the protocol's own headers (module docstring).
_PROTOCOL_HEADER = "mcp-"

_MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")
# RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]; auth-scheme = token
_CREDENTIALS = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+)( +)(\S.*)", re.DOTALL)
# RFC 6265 §4.2.1: cookie-string = cookie-pair *( ";" SP cookie-pair ); lenient about spacing.
_COOKIE_PAIR = re.compile(r"([^;=\s][^;=]*)=([^;]*)")

# A JSON string's content: RFC 8259 §7 forbids raw control characters in a string, so a line
# break ends the scan (a torn value stops there instead of swallowing the next SSE line).
_STR = r'[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*'
# A string that ends with its quote, or is cut short by a line break or the end of the text.
_STR_VALUE = rf'"(?P<s>{_STR})(?:"|\\?(?=[\n\r]|\Z))'
# RFC 8259 §6: number = [ minus ] int [ frac ] [ exp ]
_NUM_VALUE = r"(?P<n>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
# The same one level down, as JSON text inside a JSON string: its quotes arrive as \", its
# backslashes as \\ and its line breaks as \n. Units: a plain character; \\\" or \\\\ (an inner
# escaped quote or backslash); \\x (any other inner escape); \x (an outer escape, e.g. \u00e9).
_STR1 = r'(?:[^"\\\n\r]|\\\\\\["\\]|\\\\[^"\\\n\r]|\\[^"\\\n\r])*'
_STR1_VALUE = rf'\\"(?P<s>{_STR1})(?:\\"|(?=["\n\r]|\Z))'
_WS1 = r"(?:[ \t]|\\[nrt])*"

# Patterns run on the text with A-Z folded to a-z, which keeps every offset; an edit then
# replaces a span of the original. Case-insensitive sre alternations are much slower.
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_FRAGMENT_MIN = 5

_Edit = tuple[int, int, str, int]
"""(start, end, replacement, secrets replaced) on the original text."""


def _trie(names: Iterable[str]) -> str:
    """A regex alternation of names factored by common prefixes.

    sre tries the branches of an alternation one by one at every candidate position; factored,
    a quote in the text costs a few first-character tests instead of one per name.
    """
    groups: dict[str, list[str]] = {}
    optional = False
    for name in sorted(set(names)):
        if name:
            groups.setdefault(name[0], []).append(name[1:])
        else:
            optional = True
    if not groups:
        return "" if optional else r"(?!)"
    branches = [re.escape(first) + _trie(rests) for first, rests in groups.items()]
    if optional:
        return f"(?:{'|'.join(branches)})?"
    return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"


def _fragments(names: Iterable[str]) -> tuple[str, ...]:
    """Few substrings such that every name holds one: the precheck's `in` scans (set cover)."""
    uncovered = set(names)
    chosen: list[str] = []
    while uncovered:
        candidates = {
            n[i:j]
            for n in uncovered
            for i in range(len(n))
            for j in range(i + min(_FRAGMENT_MIN, len(n)), len(n) + 1)
        }
        best = max(candidates, key=lambda f: (sum(f in n for n in uncovered), len(f), f))
        chosen.append(best)
        uncovered = {n for n in uncovered if best not in n}
    return tuple(chosen)


def _escape_hint(names: Iterable[str]) -> re.Pattern[str]:
    """Matches a JSON escape that spells a character of some name, in either case."""
    chars = {c for n in names for c in n + n.upper()}
    codes = "|".join(sorted(f"{ord(c):04x}" for c in chars if ord(c) < 0x80))
    return re.compile(rf"\\u(?:{codes or '(?!)'})", re.IGNORECASE)


def _fold(text: str) -> str:
    # str.lower keeps offsets only for ASCII text ("İ" lowers to two characters).
    return text.lower() if text.isascii() else text.translate(_ASCII_FOLD)


def _json_unescape(raw: str) -> str:
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:  # a torn escape at a cut: hash what is there
        return raw
    return value if isinstance(value, str) else raw


def _json_escape(value: str, level: int = 0) -> str:
    # ASCII only, so the result survives the recorder's surrogateescape encoding; `level` 1 is
    # for JSON text inside a JSON string, escaped twice.
    for _ in range(level + 1):
        value = json.dumps(value)[1:-1]
    return value


def _apply(text: str, edits: list[_Edit]) -> tuple[str, int]:
    """The text with non-overlapping edits made; an edit inside an earlier one is dropped."""
    edits.sort()
    pieces: list[str] = []
    done = total = 0
    for start, end, replacement, count in edits:
        if start < done:  # e.g. a URL's ?access_token= inside a redacted "password" value
            continue
        pieces += (text[done:start], replacement)
        done = end
        total += count
    pieces.append(text[done:])
    return "".join(pieces), total


class Redactor:
    """Replaces credentials in headers, request paths and JSON or SSE text by keyed hashes."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        key: bytes | None = None,
        headers: Sequence[str] = DEFAULT_HEADERS,
        json_keys: Sequence[str] = DEFAULT_JSON_KEYS,
        query_keys: Sequence[str] = DEFAULT_QUERY_KEYS,
    ) -> None:
        self._enabled = enabled
        self._key = key if key is not None else secrets.token_bytes(32)
        if not self._key:
            raise ValueError("the redaction key must not be empty")
        self._headers = tuple(headers)
        self._json_keys = tuple(json_keys)
        self._header_names = frozenset(h.lower() for h in self._headers if h[:1] != "*")
        self._header_suffixes = tuple(h[1:].lower() for h in self._headers if h[:1] == "*")
        self._query_keys = tuple(query_keys)
        self._key_names = frozenset(k.lower() for k in self._json_keys)
        self._fragments = _fragments(self._key_names)
        self._escape_hint = _escape_hint(self._key_names)
        names = _trie(self._key_names)
        # re.ASCII: \s and \d as JSON means them.
        # Led by a literal quote that sre skips to: "name" or, one level down, \"name\".
        self._quoted_name = re.compile(rf'"(?:{names})\\?"', re.A)
        self._member = re.compile(rf'"(?P<key>{names})"\s*:\s*(?:{_STR_VALUE}|{_NUM_VALUE})', re.A)
        self._member1 = re.compile(
            rf'\\"(?P<key>{names})\\"{_WS1}:{_WS1}(?:{_STR1_VALUE}|{_NUM_VALUE})', re.A
        )
        self._any_member = re.compile(
            rf'"(?P<key>{_STR})"\s*:\s*(?:{_STR_VALUE}|{_NUM_VALUE})', re.A
        )
        # Two patterns, each led by a literal that sre can skip to; a [?&] class is slower.
        self._pairs = tuple(
            re.compile(rf'{lead}(?P<key>{names})=(?P<v>[^&#"\s\\]*)') for lead in (r"\?", "&")
        )
        self._form = re.compile(rf'(?P<key>{names})=(?P<v>[^&#"\s\\]*)')
        query_names = self._key_names | {k.lower() for k in self._query_keys}
        self._query_fragments = _fragments(query_names)
        self._query_pair = re.compile(rf"[?&](?P<key>{_trie(query_names)})=(?P<v>[^&#]*)")

    @property
    def enabled(self) -> bool:
        """False only under an explicit `--no-redact`: inputs then pass unchanged."""
        return self._enabled

    def policy(self) -> dict[str, object]:
        """The `redaction` field of `capture_open` (`records.RedactionPolicy`)."""
        if not self._enabled:
            return {
                "enabled": False,
                "key_id": None,
                "headers": [],
                "json_keys": [],
                "query_keys": [],
            }
        return {
            "enabled": True,
            "key_id": hashlib.sha256(self._key).hexdigest()[:8],
            "headers": list(self._headers),
            "json_keys": list(self._json_keys),
            "query_keys": list(self._query_keys),
        }

    def marker(self, secret: str) -> str:
        """`[redacted:<hmac8>]` for a secret under this capture's key."""
        digest = hmac.digest(self._key, secret.encode("utf-8", "surrogatepass"), "sha256")
        return f"[redacted:{digest.hex()[:8]}]"

    def headers(self, headers: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
        """A copy with credential header values redacted, and how many values were."""
        if not self._enabled:
            return list(headers), 0
        out: list[tuple[str, str]] = []
        total = 0
        for name, value in headers:
            lower = name.lower()
            if lower in self._header_names or (
                lower.endswith(self._header_suffixes) and not lower.startswith(_PROTOCOL_HEADER)
            ):
                value, count = self._mask(lower, value)
                total += count
            out.append((name, value))
        return out, total

    def path(self, path: str) -> tuple[str, int]:
        """The request target with listed query parameters redacted."""
        if not self._enabled or "?" not in path:
            return path, 0
        folded = _fold(path)
        if not any(f in folded for f in self._query_fragments):
            return path, 0
        edits = [self._pair_edit(path, m) for m in self._query_pair.finditer(folded)]
        return _apply(path, [e for e in edits if e is not None])

    def may_redact(self, text: str) -> bool:
        """False when `text` surely holds nothing to redact (`text` would return it as is).

        The precheck that `text` starts with. Every test in it finds in a concatenation what
        it finds in any of its parts, so one call on a block of texts joined answers for each.
        """
        if not self._enabled:
            return False
        folded = _fold(text)
        named, escaped = self._precheck(text, folded)
        return named or escaped

    def _precheck(self, text: str, folded: str) -> tuple[bool, bool]:
        # A listed name as a whole JSON key, or as a query/form parameter. A bare substring
        # test is not enough: MCP text is full of "progressToken".
        named = self._quoted_name.search(folded) is not None or (
            "=" in folded and any(f in folded for f in self._fragments)
        )
        escaped = "\\u" in text and self._escape_hint.search(text) is not None
        return named, escaped

    def text(self, text: str) -> tuple[str, int]:
        """A JSON body or a block of SSE events with listed values redacted, all else as is."""
        if not self._enabled:
            return text, 0
        folded = _fold(text)
        named, escaped = self._precheck(text, folded)
        if not (named or escaped):
            return text, 0
        edits: list[_Edit | None] = []
        if named:
            for m in self._member.finditer(folded):
                edits.append(self._member_edit(text, m, m["key"], 0))
            for m in self._member1.finditer(folded):
                edits.append(self._member_edit(text, m, m["key"], 1))
            for pattern in self._pairs:
                edits.extend(self._pair_edit(text, m) for m in pattern.finditer(folded))
            form = self._form.match(folded)  # a form-encoded body: the first pair
            if form is not None:
                edits.append(self._pair_edit(text, form))
        if escaped:
            for m in self._any_member.finditer(text):
                raw = m["key"]
                if "\\u" in raw:
                    key = _json_unescape(raw).lower()
                    if key in self._key_names:
                        edits.append(self._member_edit(text, m, key, 0))
        return _apply(text, [e for e in edits if e is not None])

    def _member_edit(self, text: str, m: re.Match[str], key: str, level: int) -> _Edit | None:
        """The edit that redacts the value of a JSON member matched by a member pattern."""
        if m["s"] is not None:
            start, end = m.span("s")
            plain = _json_unescape(text[start:end])
            if level:
                plain = _json_unescape(plain)
            masked, count = self._mask(key, plain)
            replacement = _json_escape(masked, level)
        else:
            start, end = m.span("n")
            masked, count = self._mask(key, text[start:end])
            quote = '\\"' if level else '"'
            replacement = f"{quote}{_json_escape(masked, level)}{quote}"
        return (start, end, replacement, count) if count else None

    def _pair_edit(self, text: str, m: re.Match[str]) -> _Edit | None:
        """The edit that redacts the value of a `key=value` pair (percent-decoded for the hash)."""
        start, end = m.span("v")
        value = text[start:end]
        if not value or _MARKER.fullmatch(value):
            return None
        return start, end, self.marker(unquote_plus(value)), 1

    def _mask(self, name: str, value: str) -> tuple[str, int]:
        """The redacted form of a credential value and the count of secrets replaced in it."""
        if not value or _MARKER.fullmatch(value):
            return value, 0
        if name in ("authorization", "proxy-authorization"):
            m = _CREDENTIALS.fullmatch(value)
            if m is not None:
                if _MARKER.fullmatch(m[3]):
                    return value, 0
                return f"{m[1]}{m[2]}{self.marker(m[3])}", 1
        elif name in ("cookie", "set-cookie"):
            count = 0

            def pair(m: re.Match[str]) -> str:
                nonlocal count
                if not m[2] or _MARKER.fullmatch(m[2]):
                    return m[0]
                count += 1
                return f"{m[1]}={self.marker(m[2])}"

            # Set-Cookie: only the first pair is the cookie; the rest are attributes (§4.1.1).
            masked = _COOKIE_PAIR.sub(pair, value, count=1 if name == "set-cookie" else 0)
            if count or _COOKIE_PAIR.search(value):
                return masked, count
        return self.marker(value), 1
