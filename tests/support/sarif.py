"""Validation against the SARIF 2.1.0 JSON schema (tests/fixtures/sarif: the copy GitHub's code
scanning upload action ships, MIT licensed, its LICENSE beside it)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"


@cache
def _validator() -> Any:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    # Not `check_schema`: this copy nests one `anyOf` (of region) under `properties`, which the
    # metaschema rejects; validation reads it as a property named "anyOf", which SARIF lacks.
    return jsonschema.validators.validator_for(schema)(schema)


def assert_valid_sarif(data: object) -> None:
    """AssertionError listing the first schema violations of a SARIF log, if any."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
