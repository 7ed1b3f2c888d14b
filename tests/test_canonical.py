"""RFC 8785 canonical JSON: the RFC's own examples, cyberphone's test vectors, and properties."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.canonical import canonical_hash, canonical_json
from tests.support.examples import examples

# https://github.com/cyberphone/json-canonicalization/tree/master/testdata: input/ and output/
# (the output files hold raw UTF-8; invisible characters are written as escapes here).
CYBERPHONE = {
    "arrays": (
        '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]',
        '[56,{"1":[],"10":null,"d":true}]',
    ),
    "french": (
        '{\n  "peach": "This sorting order",\n  "péché": "is wrong according to French",\n'
        '  "pêche": "but canonicalization MUST",\n  "sin":   "ingnore locale"\n}\n',
        '{"peach":"This sorting order","péché":"is wrong according to French",'
        '"pêche":"but canonicalization MUST","sin":"ingnore locale"}',
    ),
    "structures": (
        '{\n  "1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0},\n  "10": { },\n  "": "empty",\n'
        '  "a": { },\n  "111": [ { } ],\n  "A": { }\n}',
        '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}',
    ),
    "unicode": (
        '{\n  "Unnormalized Unicode":"\\u1e0d\\u0307"\n}\n',
        '{"Unnormalized Unicode":"\u1e0d\u0307"}',
    ),
    "values": (
        '{\n  "numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],\n'
        '  "escaping": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        '  "literals": [null, true, false]\n}',
        '{"escaping":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/","literals":[null,true,false],'
        '"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}',
    ),
    "weird": (
        '{\n  "\\u20ac": "Euro Sign",\n  "1": "One",\n  "\\u0080": "Control\\u007f",\n'
        '  "\\ud83d\\ude02": "Smiley",\n  "\\u00f6": "Latin Small Letter O With Diaeresis",\n'
        '  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n  "</script>": "Browser Challenge"\n}\n',
        '{"1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f602":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ),
}


@pytest.mark.parametrize(("source", "expected"), CYBERPHONE.values(), ids=CYBERPHONE.keys())
def test_cyberphone_vectors(source: str, expected: str) -> None:
    assert canonical_json(json.loads(source)) == expected


def test_cyberphone_readme_sample_bytes() -> None:
    # The README's sample with its output "converted to UTF-8 ... in hexadecimal notation".
    source = (
        '{\n  "numbers": [1E30, 4.50, 6, 2e-3, 0.000000000000000000000000001],\n'
        '  "escaping": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        '  "other":  [null, true, false]\n}'
    )
    expected = bytes.fromhex(
        "7b 22 65 73 63 61 70 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42 5c 22"
        " 5c 5c 5c 5c 5c 22 2f 22 2c 22 6e 75 6d 62 65 72 73 22 3a 5b 31 65 2b 33 30 2c 34 2e 35 2c"
        " 36 2c 30 2e 30 30 32 2c 31 65 2d 32 37 5d 2c 22 6f 74 68 65 72 22 3a 5b 6e 75 6c 6c 2c 74"
        " 72 75 65 2c 66 61 6c 73 65 5d 7d"
    )
    assert canonical_json(json.loads(source)).encode("utf-8") == expected


def test_rfc8785_section_3_2_2_example() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    assert canonical_json(json.loads(source)) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_rfc8785_section_3_2_3_sorting_example() -> None:
    source = (
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With'
        ' Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control",'
        ' "\\u00f6": "Latin Small Letter O With Diaeresis"}'
    )
    keys = list(json.loads(canonical_json(json.loads(source))))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FB33 although its code point is larger.
    value = {"\ufb33": 3, "\U0001f600": 2, "\u20ac": 1}
    assert canonical_json(value) == '{"\u20ac":1,"\U0001f600":2,"\ufb33":3}'
    assert sorted(value) != ["\u20ac", "\U0001f600", "\ufb33"]  # what code point order gives


# RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript text.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    (number,) = struct.unpack(">d", bytes.fromhex(bits))
    assert canonical_json(number) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (-1.5e-7, "-1.5e-7"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (-2.5, "-2.5"),
        (7.0, "7"),
        (2.0**53 - 1, "9007199254740991"),
        (1.5e300, "1.5e+300"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        (7, "7"),
        (-7, "-7"),
        # Deviation: ints keep every digit; the RFC would round them through a double first.
        (2**53 + 1, "9007199254740993"),
        (10**21, "1000000000000000000000"),
        (-(10**40), "-10000000000000000000000000000000000000000"),
    ],
)
def test_numbers_and_literals(value: object, expected: str) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", '""'),
        ('"\\', '"\\"\\\\"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
        ("\x0f", '"\\u000f"'),  # lowercase hex
        ("\x7f\x80\u2028\u2029", '"\x7f\x80\u2028\u2029"'),  # not escaped by §3.2.2.2
        ("/</script>", '"/</script>"'),
        ("\u20ac\U0001f600", '"\u20ac\U0001f600"'),
    ],
)
def test_string_escaping(value: str, expected: str) -> None:
    assert canonical_json(value) == expected


def test_containers_and_subclasses() -> None:
    assert canonical_json([]) == "[]"
    assert canonical_json({}) == "{}"
    assert canonical_json((1, (2,), [])) == "[1,[2],[]]"
    assert canonical_json({"b": [{}], "a": {"d": [], "c": None}}) == (
        '{"a":{"c":null,"d":[]},"b":[{}]}'
    )
    shared = [1]
    assert canonical_json([shared, {"x": shared}]) == '[[1],{"x":[1]}]'


def test_deep_nesting_is_not_limited_by_recursion() -> None:
    value: Any = 1
    for _ in range(20_000):
        value = {"a": [value]}
    assert canonical_json(value) == '{"a":[' * 20_000 + "1" + "]}" * 20_000


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), [1.0, float("nan")]])
def test_non_finite_numbers_raise_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="not a JSON number"):
        canonical_json(value)


def test_cycles_raise_value_error() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="circular"):
        canonical_json(cycle)


@pytest.mark.parametrize("value", [{1: "a"}, {"a": {None: 1}}, {1, 2}, b"x", object()])
def test_non_json_values_raise_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        canonical_json(value)


def test_lone_surrogate_is_kept_and_still_hashes() -> None:
    text = canonical_json(json.loads('"\\ud800"'))
    assert text == '"\ud800"'
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")
    assert len(canonical_hash("\ud800")) == 16
    assert canonical_hash("\ud800") != canonical_hash("\udc00")


def test_canonical_hash() -> None:
    assert canonical_hash({}) == "44136fa355b3678a"  # sha256("{}")
    value = {"b": 1, "a": [1.0, "\u20ac"]}
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    assert canonical_hash(value) == digest[:16]
    assert canonical_hash(json.loads('{ "a" : [1, "\\u20ac"], "b" : 1.0 }')) == digest[:16]
    assert canonical_hash(7) != canonical_hash("7")


# JSON values as json.loads builds them; ints well past 2**53, floats finite (NaN is not JSON).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(300))
@given(json_values)
def test_canonical_text_is_a_fixed_point(value: object) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text


def _reshuffled(value: object, rng: random.Random) -> object:
    """Rebuild a value with every object's members inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _reshuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_reshuffled(item, rng) for item in value]
    return value


@settings(max_examples=examples(300))
@given(
    json_values,
    st.randoms(use_true_random=False),
    st.sampled_from([None, 0, 2, "\t"]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\r\n ")]),
    st.booleans(),
)
def test_key_order_and_whitespace_never_change_the_result(
    value: object,
    rng: random.Random,
    indent: int | str | None,
    separators: tuple[str, str],
    ensure_ascii: bool,
) -> None:
    expected = canonical_json(json.loads(json.dumps(value)))
    text = json.dumps(
        _reshuffled(value, rng), indent=indent, separators=separators, ensure_ascii=ensure_ascii
    )
    assert canonical_json(json.loads(f" \n{text}\t ")) == expected
    assert canonical_hash(json.loads(text)) == canonical_hash(value)
