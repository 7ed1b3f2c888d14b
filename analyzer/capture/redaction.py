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
  `Set-Cookie` its attributes, because sticky-session cookies are how replicas get picked. The
  same rules apply to a JSON member or query parameter of the same name. `X-Api-Key` is in the
  default list beside the four DESIGN.md names.
- JSON, wherever it appears in the text (a body, SSE `data:` lines): a member whose name is
  listed has its string value redacted, and a number too (a numeric PIN is a secret; it becomes
  a string). `true`, `false` and `null` are left. Objects and arrays are not blanked but walked,
  as everything else is: a tool's JSON Schema describing a `password` property stays readable.
- JSON text carried inside a JSON string (an MCP tool result's `content[].text`) is redacted
  too, one level deep: `{"text": "{\\"password\\": \\"x\\"}"}`.
- A key spelled with JSON escapes (`"acc\\u0065ss_token"`) is decoded and matched, still in
  place. That pass runs only when the text holds `\\u00` followed by 2..7, the only escapes that
  can spell an ASCII key name, so bodies of escaped non-ASCII text do not pay for it. It covers
  top-level JSON only, not JSON inside a string.
- A value cut short (a truncated body, an unterminated SSE tail) is redacted up to where it
  stops, so the head of a secret never leaks through a cap.
- `key=value` pairs after `?` or `&` (a URL inside a body, a form-encoded body at the start of
  the text) are redacted by the JSON key list, value percent-decoded before hashing.
- Empty values and values that are already redaction markers are left alone, so redacting twice
  changes nothing.

Not covered: a member split across two SSE `data:` lines, escaped key names inside JSON-in-a-
string, JSON two strings deep, key names percent-encoded in a query, and strings inside an array
held by a secret name (`"api_key": ["a", "b"]`); the defaults name no OAuth `code`, because
JSON-RPC errors carry a numeric `code`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
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
)
"""Header names whose values are credentials (matched ignoring case)."""

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
)
"""JSON member names whose values are credentials (exact names, ignoring ASCII case)."""

DEFAULT_QUERY_KEYS: tuple[str, ...] = DEFAULT_JSON_KEYS
"""Query and form parameter names redacted; `Redactor` uses its `json_keys` for both."""

_MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")
# RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]; auth-scheme = token
_CREDENTIALS = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+)( +)(\S.*)", re.DOTALL)
# RFC 6265 §4.2.1: cookie-string = cookie-pair *( ";" SP cookie-pair ); lenient about spacing.
_COOKIE_PAIR = re.compile(r"([^;=\s][^;=]*)=([^;]*)")
# The only JSON escapes that can spell an ASCII key name: \u0020..\u007f.
_ASCII_ESCAPE = r"\\u00[2-7]"

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
_WS1 = r"(?:[ \t]|\\[nrt])*"

def _alternation(names: Iterable[str]) -> str:
    # Longest first, so that a name that prefixes another cannot win the alternation.
    return "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))


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


class Redactor:
    """Replaces credentials in headers, request paths and JSON or SSE text by keyed hashes."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        key: bytes | None = None,
        headers: Sequence[str] = DEFAULT_HEADERS,
        json_keys: Sequence[str] = DEFAULT_JSON_KEYS,
    ) -> None:
        self._enabled = enabled
        self._key = key if key is not None else secrets.token_bytes(32)
        if not self._key:
            raise ValueError("the redaction key must not be empty")
        self._headers = tuple(headers)
        self._json_keys = tuple(json_keys)
        self._header_names = frozenset(h.lower() for h in self._headers)
        self._key_names = frozenset(k.lower() for k in self._json_keys)
        names = _alternation(self._json_keys) if self._json_keys else r"(?!)"
        # ASCII: case folds only A-Z (no Kelvin sign for k), and \s, \d are JSON's own.
        flags = re.IGNORECASE | re.ASCII
        # Cheap precheck: no listed name and no ASCII escape means nothing to redact.
        self._hint = re.compile(rf"{names}|{_ASCII_ESCAPE}", flags)
        self._member = re.compile(rf'"(?P<key>{names})"\s*:\s*(?:{_STR_VALUE}|{_NUM_VALUE})', flags)
        self._member1 = re.compile(
            rf'\\"(?P<key>{names})\\"{_WS1}:{_WS1}'
            rf'(?:\\"(?P<s>{_STR1})(?:\\"|(?=["\n\r]|\Z))|{_NUM_VALUE})',
            flags,
        )
        self._escaped_key = re.compile(
            rf'"(?P<key>{_STR})"\s*:\s*(?:{_STR_VALUE}|{_NUM_VALUE})', re.ASCII
        )
        self._escaped_hint = re.compile(_ASCII_ESCAPE)
        self._pair = re.compile(rf"(?:(?<=[?&])|\A)(?P<key>{names})=(?P<v>[^&#\"\s\\]*)", flags)
        self._query_pair = re.compile(rf"(?:(?<=&)|\A)(?P<key>{names})=(?P<v>[^&#]*)", flags)

    @property
    def enabled(self) -> bool:
        """False only under an explicit `--no-redact`: inputs then pass unchanged."""
        return self._enabled

    def policy(self) -> dict[str, object]:
        """The `redaction` field of `capture_open` (`records.RedactionPolicy`)."""
        if not self._enabled:
            return {"enabled": False, "key_id": None, "headers": [], "json_keys": []}
        return {
            "enabled": True,
            "key_id": hashlib.sha256(self._key).hexdigest()[:8],
            "headers": list(self._headers),
            "json_keys": list(self._json_keys),
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
            if lower in self._header_names:
                value, count = self._mask(lower, value)
                total += count
            out.append((name, value))
        return out, total

    def path(self, path: str) -> tuple[str, int]:
        """The request target with listed query parameters redacted."""
        if not self._enabled or "?" not in path or not self._hint.search(path):
            return path, 0
        base, _, query = path.partition("?")
        query, count = self._pairs(self._query_pair, query)
        return f"{base}?{query}", count

    def text(self, text: str) -> tuple[str, int]:
        """A JSON body or a block of SSE events with listed values redacted, all else as is."""
        if not self._enabled or not self._hint.search(text):
            return text, 0
        total = 0

        def member(m: re.Match[str], key: str, level: int) -> str:
            nonlocal total
            raw, number = m["s"], m["n"]
            if raw is not None:
                plain = _json_unescape(raw)
                if level:
                    plain = _json_unescape(plain)
                masked, count = self._mask(key, plain)
                group, replacement = "s", _json_escape(masked, level)
            else:
                masked, count = self._mask(key, number)
                quote = '\\"' if level else '"'
                group, replacement = "n", f"{quote}{_json_escape(masked, level)}{quote}"
            if not count:
                return m[0]
            total += count
            start, end = m.start(group) - m.start(), m.end(group) - m.start()
            return f"{m[0][:start]}{replacement}{m[0][end:]}"

        def escaped_key(m: re.Match[str]) -> str:
            raw = m["key"]
            if "\\u" not in raw:
                return m[0]
            key = _json_unescape(raw).lower()
            return member(m, key, 0) if key in self._key_names else m[0]

        text = self._member.sub(lambda m: member(m, m["key"].lower(), 0), text)
        text = self._member1.sub(lambda m: member(m, m["key"].lower(), 1), text)
        if self._escaped_hint.search(text):
            text = self._escaped_key.sub(escaped_key, text)
        text, count = self._pairs(self._pair, text)
        return text, total + count

    def _pairs(self, pattern: re.Pattern[str], text: str) -> tuple[str, int]:
        total = 0

        def pair(m: re.Match[str]) -> str:
            nonlocal total
            value = m["v"]
            if not value or _MARKER.fullmatch(value):
                return m[0]
            total += 1
            return f"{m['key']}={self.marker(unquote_plus(value))}"

        return pattern.sub(pair, text), total

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

