"""Tests for analyzer.capture.redaction: headers, query strings, JSON and SSE text."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.capture.redaction import (
    DEFAULT_HEADERS,
    DEFAULT_JSON_KEYS,
    DEFAULT_QUERY_KEYS,
    Redactor,
)
from analyzer.record_models import RedactionPolicy
from tests.support.examples import examples

KEY = b"k" * 32
R = Redactor(key=KEY)


def mark(secret: str, key: bytes = KEY) -> str:
    """The marker computed independently of the module."""
    digest = hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()
    return f"[redacted:{digest[:8]}]"


# -- headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "expected", "count"),
    [
        ("Authorization", "Bearer abc.def", f"Bearer {mark('abc.def')}", 1),
        ("authorization", "Basic dXNlcjpwYXNz", f"Basic {mark('dXNlcjpwYXNz')}", 1),
        ("AUTHORIZATION", "rawtoken", mark("rawtoken"), 1),
        ("Proxy-Authorization", "Basic eA==", f"Basic {mark('eA==')}", 1),
        ("Cookie", "sid=abc; AWSALB=xyz", f"sid={mark('abc')}; AWSALB={mark('xyz')}", 2),
        ("cookie", "justavalue", mark("justavalue"), 1),
        (
            "Set-Cookie",
            "sid=abc; Path=/; HttpOnly; Max-Age=60",
            f"sid={mark('abc')}; Path=/; HttpOnly; Max-Age=60",
            1,
        ),
        ("X-Api-Key", "k-123", mark("k-123"), 1),
        ("Authorization", "", "", 0),
        ("Content-Type", "application/json", "application/json", 0),
        ("Mcp-Session-Id", "a1b2", "a1b2", 0),
        ("X-Authorization-Hint", "Bearer x", "Bearer x", 0),
    ],
)
def test_header_values(name: str, value: str, expected: str, count: int) -> None:
    assert R.headers([(name, value)]) == ([(name, expected)], count)


def test_headers_keep_order_duplicates_and_counts() -> None:
    headers = [
        ("Host", "h"),
        ("Cookie", "a=1"),
        ("Cookie", "b=2"),
        ("Authorization", "Bearer t"),
    ]
    out, count = R.headers(headers)
    assert [n for n, _ in out] == ["Host", "Cookie", "Cookie", "Authorization"]
    assert out[0] == ("Host", "h")
    assert count == 3
    assert headers[1] == ("Cookie", "a=1")  # the input is not touched


def test_every_default_header_is_redacted() -> None:
    for name in DEFAULT_HEADERS:
        name = name.replace("*", "X-Any")
        assert R.headers([(name.title(), "s3cret")]) == ([(name.title(), mark("s3cret"))], 1)


def test_header_names_and_patterns_beyond_the_design_four() -> None:
    secret = [
        "Api-Key",
        "X-Auth-Token",
        "X-Access-Token",
        "Authorization-Token",
        "X-Csrf-Token",
        "X-Amz-Security-Token",
        "X-Goog-Api-Key",
        "X-Client-Secret",
    ]
    kept = [
        "Token",  # a pattern is a suffix after a dash, never a substring
        "X-Tokens",
        "X-Token-Count",
        "X-Secretive",
        "Mcp-Param-Token",  # the protocol's own: the analysis compares it with the body
        "Mcp-Session-Id",
    ]
    out, count = R.headers([(name, "v-1") for name in secret + kept])
    assert out == [(n, mark("v-1")) for n in secret] + [(n, "v-1") for n in kept]
    assert count == len(secret)


def test_custom_header_patterns() -> None:
    r = Redactor(key=KEY, headers=["*-pin"])
    assert r.headers([("X-Pin", "1"), ("X-Auth-Token", "2")]) == (
        [("X-Pin", mark("1")), ("X-Auth-Token", "2")],
        1,
    )
    assert r.policy()["headers"] == ["*-pin"]


# -- JSON keys -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", DEFAULT_JSON_KEYS)
def test_every_default_json_key(key: str) -> None:
    assert R.text(f'{{"{key}":"s3cret","x":1}}') == (f'{{"{key}":"{mark("s3cret")}","x":1}}', 1)


@pytest.mark.parametrize("key", ["ACCESS_TOKEN", "Password", "APIKEY", "Client_Secret"])
def test_json_keys_ignore_ascii_case(key: str) -> None:
    assert R.text(f'{{"{key}":"s3cret"}}') == (f'{{"{key}":"{mark("s3cret")}"}}', 1)


@pytest.mark.parametrize(
    "text",
    [
        '{"progressToken":"abc"}',
        '{"params":{"_meta":{"progressToken":42}}}',
        '{"maxTokens":1000}',
        '{"max_tokens":1000}',
        '{"tokens":["a","b"]}',
        '{"token":"abc"}',
        '{"passwords":"x","my_password":"y","password_hint":"z","secrets":"w"}',
        '{"access_token_expires_in":3600,"token_type":"Bearer"}',
        '{"authorization_servers":["https://as"]}',
        '{"name":"access_token","value":"password"}',
        '{"text":"the password is in the access_token field"}',
        "plain text, no json: password access_token",
    ],
)
def test_near_misses_are_untouched(text: str) -> None:
    assert R.text(text) == (text, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"password" : "x"}', f'{{"password" : "{mark("x")}"}}'),
        ('{\n  "password":\n\t"x"\n}', f'{{\n  "password":\n\t"{mark("x")}"\n}}'),
        ('{ "password":"x" , "a" : 1 }', f'{{ "password":"{mark("x")}" , "a" : 1 }}'),
        (
            '[{"password":"x"},{"password":"y"}]',
            f'[{{"password":"{mark("x")}"}},{{"password":"{mark("y")}"}}]',
        ),
    ],
)
def test_whitespace_is_preserved(text: str, expected: str) -> None:
    assert R.text(text)[0] == expected


def test_escaped_quotes_and_backslashes_inside_a_secret() -> None:
    text = r'{"password":"a\"b\\c\u00e9","next":"keep \"me\""}'
    out, count = R.text(text)
    assert count == 1
    assert (
        out
        == f'{{"password":"{mark("a" + chr(34) + "b" + chr(92) + "cé")}","next":"keep \\"me\\""}}'
    )
    assert json.loads(out)["next"] == 'keep "me"'


def test_equal_secrets_stay_equal_and_different_differ() -> None:
    out, count = R.text('{"a":{"password":"p1"},"b":{"password":"p1"},"c":{"password":"p2"}}')
    doc = json.loads(out)
    assert count == 3
    assert doc["a"]["password"] == doc["b"]["password"] != doc["c"]["password"]


def test_same_secret_in_header_and_body_compares() -> None:
    headers, _ = R.headers([("Authorization", "Bearer tok")])
    body, _ = R.text('{"access_token":"tok"}')
    assert headers[0][1] == f"Bearer {json.loads(body)['access_token']}"


def test_the_key_decides_the_hash() -> None:
    text = '{"password":"same"}'
    other = Redactor(key=b"o" * 32)
    assert Redactor(key=KEY).text(text) == R.text(text)
    assert other.text(text)[0] != R.text(text)[0]
    assert other.policy()["key_id"] != R.policy()["key_id"]


def test_random_keys_differ_per_capture() -> None:
    assert Redactor().policy()["key_id"] != Redactor().policy()["key_id"]


@pytest.mark.parametrize(
    ("text", "expected", "count"),
    [
        # numbers are redacted (a PIN is a secret) and become strings
        ('{"password":1234}', f'{{"password":"{mark("1234")}"}}', 1),
        ('{"secret":-1.5e3}', f'{{"secret":"{mark("-1.5e3")}"}}', 1),
        # true, false, null stay
        ('{"secret":true,"password":null,"api_key":false}', None, 0),
        # objects are walked, not blanked: a JSON Schema for a password field stays readable
        ('{"password":{"type":"string","minLength":8}}', None, 0),
        ('{"secret":{"password":"x"}}', f'{{"secret":{{"password":"{mark("x")}"}}}}', 1),
        # an empty secret has nothing to hide
        ('{"password":""}', None, 0),
    ],
)
def test_non_string_values(text: str, expected: str | None, count: int) -> None:
    assert R.text(text) == (expected if expected is not None else text, count)


def test_header_rules_apply_to_json_members_of_the_same_name() -> None:
    text = '{"headers":{"Authorization":"Bearer t","Cookie":"a=1; b=2"}}'
    cookie = f"a={mark('1')}; b={mark('2')}"
    expected = f'{{"headers":{{"Authorization":"Bearer {mark("t")}","Cookie":"{cookie}"}}}}'
    assert R.text(text) == (expected, 3)


# -- SSE and embedded JSON -----------------------------------------------------------------


def test_sse_block() -> None:
    text = 'event: message\ndata: {"access_token":"abc"}\n\n'
    assert R.text(text) == (f'event: message\ndata: {{"access_token":"{mark("abc")}"}}\n\n', 1)


def test_sse_blocks_with_ids_and_crlf() -> None:
    text = (
        'id: 1\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"refresh_token":"r1"}}\r\n\r\n'
        'id: 2\r\ndata: {"jsonrpc":"2.0","method":"x","params":{"progressToken":"p"}}\r\n\r\n'
    )
    out, count = R.text(text)
    assert count == 1
    assert out == text.replace('"r1"', f'"{mark("r1")}"')


def test_torn_value_stops_at_the_line_end() -> None:
    text = 'data: {"password":"abc\n\ndata: {"x":"y"}\n\n'
    assert R.text(text) == (f'data: {{"password":"{mark("abc")}\n\ndata: {{"x":"y"}}\n\n', 1)


def test_truncated_body_redacts_the_secret_head() -> None:
    assert R.text('{"result":{"access_token":"eyJhbGciOi') == (
        f'{{"result":{{"access_token":"{mark("eyJhbGciOi")}',
        1,
    )


def test_json_inside_a_json_string() -> None:
    inner = json.dumps({"access_token": "abc", "n": 1, "pin": {"password": 42}}, indent=2)
    text = json.dumps({"content": [{"type": "text", "text": inner}]})
    out, count = R.text(text)
    assert count == 2
    redacted = json.loads(json.loads(out)["content"][0]["text"])
    assert redacted == {"access_token": mark("abc"), "n": 1, "pin": {"password": mark("42")}}


def test_escaped_key_name_is_caught_in_place() -> None:
    text = '{"acc\\u0065ss_token": "abc", "other": "\\u00e9"}'
    assert R.text(text) == (f'{{"acc\\u0065ss_token": "{mark("abc")}", "other": "\\u00e9"}}', 1)


def test_escaped_non_secret_key_is_untouched() -> None:
    for text in ['{"progr\\u0065ssToken":"x"}', '{"a":"\\u003cb\\u003e \\u0026"}']:
        assert R.text(text) == (text, 0)


def test_redacting_twice_changes_nothing() -> None:
    text = 'data: {"password":"x","cookie":"a=1","authorization":"Bearer t"}\n\n'
    once, count = R.text(text)
    assert count == 3
    assert R.text(once) == (once, 0)


# -- URLs and forms ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected", "count"),
    [
        ("/mcp", "/mcp", 0),
        ("/mcp?session=1", "/mcp?session=1", 0),
        ("/mcp?access_token=abc", f"/mcp?access_token={mark('abc')}", 1),
        ("/mcp?a=1&API_KEY=k%20y&b=2", f"/mcp?a=1&API_KEY={mark('k y')}&b=2", 1),
        ("/mcp?token=abc&progressToken=1", f"/mcp?token={mark('abc')}&progressToken=1", 1),
        ("/mcp?my_password=x&password=", "/mcp?my_password=x&password=", 0),
        (
            "/sse?id_token=a&refresh_token=b",
            f"/sse?id_token={mark('a')}&refresh_token={mark('b')}",
            2,
        ),
    ],
)
def test_query_parameters(path: str, expected: str, count: int) -> None:
    assert R.path(path) == (expected, count)


def test_url_inside_json_and_form_body() -> None:
    text = '{"url":"https://x/cb?code=1&access_token=abc&state=s"}'
    assert R.text(text) == (text.replace("=abc", f"={mark('abc')}"), 1)
    form = "grant_type=refresh_token&refresh_token=r1&client_secret=c%2B1"
    expected = f"grant_type=refresh_token&refresh_token={mark('r1')}&client_secret={mark('c+1')}"
    assert R.text(form) == (expected, 2)
    assert R.text("password=p&x=1") == (f"password={mark('p')}&x=1", 1)
    # The query-only names stay out of text: JSON-RPC carries `code` and `token` everywhere.
    assert R.text("code=1&token=2") == ("code=1&token=2", 0)
    assert R.text('{"u":"https://x/?key=k&token=t"}') == ('{"u":"https://x/?key=k&token=t"}', 0)


def test_query_only_names_apply_to_the_request_target() -> None:
    path = "/cb?Code=c1&state=s&KEY=k1&apikey=a1&tokens=1&my_key=2&zipcode=3"
    expected = f"/cb?Code={mark('c1')}&state=s&KEY={mark('k1')}&apikey={mark('a1')}"
    assert R.path(path) == (expected + "&tokens=1&my_key=2&zipcode=3", 3)


def test_custom_query_keys() -> None:
    r = Redactor(key=KEY, json_keys=["pin"], query_keys=["otp"])
    assert r.path("/m?otp=1&pin=2&token=3") == (f"/m?otp={mark('1')}&pin={mark('2')}&token=3", 2)


def test_a_secret_inside_a_secret_counts_once() -> None:
    text = '{"password":"x?access_token=y"}'
    assert R.text(text) == (f'{{"password":"{mark("x?access_token=y")}"}}', 1)


# -- policy and the off switch -------------------------------------------------------------


def test_policy_validates_and_names_the_key() -> None:
    policy = RedactionPolicy.model_validate(R.policy())
    assert policy.enabled
    assert policy.key_id == hashlib.sha256(KEY).hexdigest()[:8]
    assert policy.headers == list(DEFAULT_HEADERS)
    assert policy.json_keys == list(DEFAULT_JSON_KEYS)
    assert policy.query_keys == list(DEFAULT_QUERY_KEYS)
    assert KEY.hex() not in json.dumps(R.policy())
    assert RedactionPolicy.model_validate(Redactor(enabled=False).policy()).query_keys == []


def test_disabled_passes_everything() -> None:
    off = Redactor(enabled=False)
    assert not off.enabled
    headers = [("Authorization", "Bearer t")]
    assert off.headers(headers) == (headers, 0)
    assert off.path("/mcp?access_token=a") == ("/mcp?access_token=a", 0)
    assert off.text('{"password":"x"}') == ('{"password":"x"}', 0)
    assert RedactionPolicy.model_validate(off.policy()) == RedactionPolicy(enabled=False)


def test_custom_lists() -> None:
    r = Redactor(key=KEY, headers=["x-secret-header"], json_keys=["pin"])
    assert r.headers([("Authorization", "a"), ("X-Secret-Header", "b")])[1] == 1
    assert r.text('{"pin":"1","password":"2"}') == (f'{{"pin":"{mark("1")}","password":"2"}}', 1)
    assert Redactor(key=KEY, json_keys=[]).text('{"password":"x"}') == ('{"password":"x"}', 0)


# -- property: redaction is a value-only edit of valid JSON --------------------------------

SECRET_KEYS = ["access_token", "Password", "apiKey", "client_secret", "SECRET", "id_token"]
NEAR_KEYS = ["progressToken", "maxTokens", "tokens", "token", "passwords", "my_secret"]
# Hypothesis also draws string constants from the code under test: expect any default name.
SECRET_NAMES = {k.lower() for k in DEFAULT_JSON_KEYS}
HEADER_NAMES = {h.lower() for h in DEFAULT_HEADERS}

# No "=": a "?password=x" inside a plain string is a URL secret, tested above.
strings = st.text(st.characters(exclude_characters="="), max_size=12)
keys = st.sampled_from(SECRET_KEYS + NEAR_KEYS) | strings
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
dumps_options = st.fixed_dictionaries(
    {"ensure_ascii": st.booleans(), "indent": st.sampled_from([None, 0, 2, "\t"])}
)


def expected_after(doc: object) -> object:
    """What a parser should see after redaction: listed string and number values masked."""
    if isinstance(doc, list):
        return [expected_after(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[str, object] = {}
    for k, v in doc.items():
        if k.lower() in SECRET_NAMES and isinstance(v, str) and v:
            # a JSON member named like a credential header follows the header's rules
            out[k] = R.headers([(k, v)])[0][0][1] if k.lower() in HEADER_NAMES else R.marker(v)
        elif k.lower() in SECRET_NAMES and isinstance(v, int | float) and not isinstance(v, bool):
            out[k] = R.marker(json.dumps(v))
        else:
            out[k] = expected_after(v)
    return out


@settings(max_examples=examples(300), deadline=None)
@given(documents, dumps_options)
def test_property_top_level_json(doc: object, options: dict[str, object]) -> None:
    text = json.dumps(doc, **options)  # type: ignore[arg-type]
    out, _ = R.text(text)
    assert json.loads(out) == expected_after(doc)


@settings(max_examples=examples(300), deadline=None)
@given(documents, dumps_options)
def test_property_json_in_a_string_in_sse(doc: object, options: dict[str, object]) -> None:
    inner = json.dumps(doc, **options)  # type: ignore[arg-type]
    text = f"event: message\ndata: {json.dumps({'text': inner})}\n\n"
    out, _ = R.text(text)
    assert out.startswith("event: message\ndata: ") and out.endswith("\n\n")
    assert json.loads(json.loads(out.split("data: ", 1)[1])["text"]) == expected_after(doc)


# -- the precheck that the capture worker runs once per batch of chunks --------------------

PIECES = [
    '{"progressToken":1}',
    '{"password":"x"}',
    '"pass',
    'word":"x"',
    "?access_token=abc",
    "access_",
    "token=abc",
    '"acc\\u0065ss_token":"x"',
    "\\u00",
    "65",
    "plain text\n\n",
]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=5))
def test_may_redact_on_a_join_answers_for_every_part(parts: list[str]) -> None:
    if not R.may_redact("".join(parts)):
        for part in parts:
            assert R.text(part) == (part, 0)
    for part in parts:  # and alone it is exactly the precheck of `text`
        assert R.may_redact(part) or R.text(part) == (part, 0)
    assert not Redactor(enabled=False).may_redact("".join(parts))


def test_may_redact_is_false_for_mcp_progress_and_true_for_a_secret() -> None:
    assert not R.may_redact('data: {"params":{"progressToken":7,"maxTokens":3}}\n\n')
    assert R.may_redact('data: {"params":{"Password":"x"}}\n\n')
