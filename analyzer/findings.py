"""Findings: what detectors report, as rows of one Polars schema (DESIGN.md §5).

A finding names the failure (`detector`, `severity`, `title`, `detail`), where it happened
(`session`, `era`, `first_ts`, `last_ts`) and its evidence (`flow_ids`, `stream_ids`,
`event_ids`, `request_ids`), and carries a `fingerprint` that stays the same when the same fault
is analysed again (see `fingerprint`).

Detectors return a LazyFrame of the columns they know and the runner passes it through
`as_findings`, which fills the rest, computes the fingerprint and fixes the schema. A detector
that builds rows in Python returns `finding_rows(rows)`; code outside the runner that needs a
finished frame from Python rows (the runner's `analysis-error` rows, tests) uses
`findings_frame`. `finish_findings` puts a run's findings in report order.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import polars as pl

from analyzer import SeamwatchError
from analyzer.canonical import canonical_json

__all__ = [
    "EVIDENCE_COLUMNS",
    "FINDINGS_SCHEMA",
    "FINGERPRINT_EXTRA",
    "FINGERPRINT_VERSION",
    "SEVERITY_DTYPE",
    "FindingsSchemaError",
    "Severity",
    "as_findings",
    "empty_findings",
    "finding_rows",
    "findings_frame",
    "fingerprint",
    "finish_findings",
    "validate_findings",
]


class FindingsSchemaError(SeamwatchError):
    """A findings frame that does not have the schema of DESIGN.md §5."""


@functools.total_ordering
class Severity(enum.Enum):
    """How bad a finding is (DESIGN.md §5); members order by rank: info < low < medium < high.

    - high: data was lost, duplicated or executed twice, or a spec MUST was broken in a way
      that can do that;
    - medium: the conditions for such a failure are present (a resume that worked by luck);
    - low: suspicious but often benign;
    - info: context (capture health, notes).
    """

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def meaning(self) -> str:
        """The level in words, as the class docstring defines it."""
        return _MEANING[self]

    @property
    def rank(self) -> int:
        """0 for info up to 3 for high."""
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank

    @classmethod
    def parse(cls, text: str) -> Severity:
        """The severity named `text` (case-insensitive); ValueError names the choices."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r} (expected one of {choices})") from None


_MEANING: Final = {
    Severity.HIGH: "Data was lost, duplicated or executed twice, or a spec MUST was broken in a "
    "way that can do that.",
    Severity.MEDIUM: "The conditions for a loss, duplicate or double execution are present (a "
    "resume that worked by luck).",
    Severity.LOW: "Suspicious but often benign.",
    Severity.INFO: "Context: capture health, notes.",
}
_RANK: Final = {severity: rank for rank, severity in enumerate(Severity)}

#: Polars dtype of `severity`: an Enum, so it sorts and compares by rank, not alphabetically.
SEVERITY_DTYPE: Final = pl.Enum([s.value for s in Severity])

EVIDENCE_COLUMNS: Final = ("flow_ids", "stream_ids", "event_ids", "request_ids")

_TS: Final = pl.Datetime("ns", "UTC")
_STR: Final = pl.String()
_IDS: Final = pl.List(pl.String())

#: The one schema of a findings frame (DESIGN.md §5), in this column order.
FINDINGS_SCHEMA: Final = pl.Schema(
    {
        # the detector id, e.g. "duplicate-event-id"
        "detector": _STR,
        "severity": SEVERITY_DTYPE,
        # tagged session key of §2 (mcp:…, legacy:…, anon:…, client:…); null when the finding
        # is about the run or an input file rather than a session
        "session": _STR,
        # wire era of the session (e.g. "2025-06-18"), null when unknown or not applicable
        "era": _STR,
        "title": _STR,
        # what happened, where (replica, stream), and what to change
        "detail": _STR,
        # evidence, each in the detector's order (wire order where it has one), no nulls
        "flow_ids": _IDS,
        # a stream id is the flow id of the response that opened the logical stream (§2)
        "stream_ids": _IDS,
        "event_ids": _IDS,
        # JSON-RPC ids as canonical JSON text, as the timeline's `rpc_id`: 7 -> "7",
        # "7" -> "\"7\"", so a number and a string id never meet
        "request_ids": _IDS,
        "first_ts": _TS,
        "last_ts": _TS,
        "fingerprint": _STR,
    }
)

#: Bumped when what the fingerprint hashes changes, so old and new fingerprints never meet.
FINGERPRINT_VERSION: Final = 1

#: Optional column of a detector's frame: more stable evidence for the fingerprint (a tool
#: name, a warning kind) when event and request ids alone would not tell two findings apart.
#: Consumed by `as_findings`, never part of the findings schema.
FINGERPRINT_EXTRA: Final = "fingerprint_extra"

_REQUIRED: Final = ("title", "detail")


def fingerprint(
    detector: str,
    session: str | None,
    *,
    event_ids: Iterable[str] = (),
    request_ids: Iterable[str] = (),
    extra: Iterable[str] = (),
) -> str:
    """A stable 32-hex-digit id of a finding, for deduplication across runs and SARIF.

    It hashes the detector id, the session key and the evidence ids that name the fault itself:
    event ids (chosen by the server) and request ids (chosen by the client), each as a sorted
    set, plus `extra` stable keys. It never hashes flow ids, paths or times (DESIGN.md §5):
    those change when the same traffic is re-read, merged with another capture or converted to
    HAR. Stream ids are left out for the same reason: a stream id *is* a flow id (the flow of
    the response that opened the stream, §2).
    """
    basis = [
        FINGERPRINT_VERSION,
        detector,
        session,
        sorted(set(event_ids)),
        sorted(set(request_ids)),
        sorted(set(extra)),
    ]
    text = canonical_json(basis).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:32]


def empty_findings() -> pl.DataFrame:
    """A findings frame with no rows."""
    return pl.DataFrame(schema=FINDINGS_SCHEMA)


def finding_rows(rows: Iterable[Mapping[str, object]]) -> pl.LazyFrame:
    """A detector's findings built in Python, as the LazyFrame `as_findings` takes.

    Rows are mappings of finding fields: `title` and `detail` are required; `detector` and
    `severity` (a Severity or its name) may be left to the runner; `session`, `era` and the
    times default to null, evidence to empty. Times are timezone-aware datetimes or ints of ns
    since the epoch. A row may carry `fingerprint_extra` (see FINGERPRINT_EXTRA); a
    `fingerprint` key is not allowed (it is computed). Unknown keys are a FindingsSchemaError.
    """
    names = [name for name in FINDINGS_SCHEMA if name != "fingerprint"]
    columns: dict[str, list[object]] = {name: [] for name in [*names, FINGERPRINT_EXTRA]}
    for row in rows:
        unknown = set(row) - set(columns)
        if unknown:
            raise FindingsSchemaError(f"unknown finding fields: {', '.join(sorted(unknown))}")
        for name in _REQUIRED:
            columns[name].append(_text(row, name))
        for name in ("detector", "session", "era"):
            value = row.get(name)
            if value is not None and not isinstance(value, str):
                raise FindingsSchemaError(f"{name} must be a str, not {type(value).__name__}")
            columns[name].append(value)
        severity = row.get("severity")
        if severity is not None and not isinstance(severity, Severity):
            severity = Severity.parse(str(severity))
        columns["severity"].append(None if severity is None else severity.value)
        for name in (*EVIDENCE_COLUMNS, FINGERPRINT_EXTRA):
            columns[name].append(_ids(row, name))
        for name in ("first_ts", "last_ts"):
            columns[name].append(_ns(row.get(name)))
    schema = pl.Schema(
        {
            **{name: FINDINGS_SCHEMA[name] for name in names},
            "first_ts": pl.Int64(),
            "last_ts": pl.Int64(),
            FINGERPRINT_EXTRA: _IDS,
        }
    )
    return pl.LazyFrame(columns, schema=schema).with_columns(
        pl.col("first_ts", "last_ts").cast(_TS)
    )


def findings_frame(rows: Iterable[Mapping[str, object]]) -> pl.DataFrame:
    """A findings frame from Python rows (as `finding_rows` takes them), fingerprints computed.

    Unlike a detector's rows, each row here must name its `detector` and `severity`.
    """
    rows = list(rows)
    for row in rows:
        for name in ("detector", "severity"):
            if row.get(name) is None:
                raise FindingsSchemaError(f"a finding needs {name!r}")
    return validate_findings(as_findings(finding_rows(rows)).collect())


def emit(
    found: pl.LazyFrame,
    *,
    title: pl.Expr,
    detail: pl.Expr,
    remedy: str = "",
    severity: pl.Expr | None = None,
    session: str | pl.Expr = "session_id",
    era: str | pl.Expr | None = "era",
    flow_ids: str | pl.Expr | None = None,
    stream_ids: str | pl.Expr | None = None,
    event_ids: str | pl.Expr | None = None,
    request_ids: str | pl.Expr | None = None,
    first_ts: str | pl.Expr = "first_ts",
    last_ts: str | pl.Expr = "last_ts",
    extra: str | pl.Expr | None = None,
) -> pl.LazyFrame:
    """A detector's findings, one a row of `found`: the columns `as_findings` takes.

    Each keyword names a column of `found` or gives an expression; evidence left out is empty
    and `severity` left out is the detector's own. `remedy`, the detector's what-to-change
    text (`Detector.remedy`), ends every detail after a space.
    """
    if remedy:
        detail = pl.concat_str(detail, pl.lit(remedy), separator=" ")
    columns: dict[str, str | pl.Expr | None] = {
        "severity": severity,
        "session": session,
        "era": era,
        "title": title,
        "detail": detail,
        "flow_ids": flow_ids,
        "stream_ids": stream_ids,
        "event_ids": event_ids,
        "request_ids": request_ids,
        "first_ts": first_ts,
        "last_ts": last_ts,
        FINGERPRINT_EXTRA: extra,
    }
    return found.select(
        (pl.col(value) if isinstance(value, str) else value).alias(name)
        for name, value in columns.items()
        if value is not None
    )


def merged(found: pl.LazyFrame, evidence: Sequence[str]) -> pl.LazyFrame:
    """`emit`'s rows of one session and `fingerprint_extra` as one row, taken in the order of
    their times: era and severity the first's, each `evidence` column concatenated without
    repeats, the earliest `first_ts` and latest `last_ts`. Title and detail are the caller's."""
    return (
        found.sort("last_ts", "first_ts")
        .group_by("session", FINGERPRINT_EXTRA, maintain_order=True)
        .agg(
            pl.col("era", "severity").first(),
            *(
                pl.col(c)
                .list.explode(keep_nulls=False, empty_as_null=False)
                .unique(maintain_order=True)
                for c in evidence
            ),
            pl.col("first_ts").min(),
            pl.col("last_ts").max(),
        )
    )


def as_findings(
    lf: pl.LazyFrame, *, detector: str | None = None, severity: Severity | None = None
) -> pl.LazyFrame:
    """Conform a detector's output to FINDINGS_SCHEMA and add the fingerprint.

    The frame must have `title` and `detail`; `severity` (a name or SEVERITY_DTYPE; null rows
    take the default `severity`), `session`, `era`, the evidence lists and the times are
    optional, as is `fingerprint_extra` (list of str). `detector`, when given, replaces the
    frame's own column (the runner's word on which detector found it wins); without it the
    frame must carry one. `fingerprint` is always computed here, any given one dropped. Times
    may be datetimes in any zone (naive ones are taken as UTC) or ints of ns since the epoch.
    Any other column is a FindingsSchemaError: a misspelt evidence column must not
    pass unnoticed.
    """
    schema = lf.collect_schema()
    known = set(FINDINGS_SCHEMA) | {FINGERPRINT_EXTRA}
    unknown = [name for name in schema if name not in known]
    if unknown:
        raise FindingsSchemaError(f"unknown finding columns: {', '.join(unknown)}")
    missing = [name for name in _REQUIRED if name not in schema]
    if missing:
        raise FindingsSchemaError(f"missing finding columns: {', '.join(missing)}")

    def text(name: str) -> pl.Expr:
        if name in schema:
            return pl.col(name).cast(pl.String)
        return pl.lit(None, dtype=pl.String).alias(name)

    def ids(name: str) -> pl.Expr:
        if name not in schema:
            return pl.lit([], dtype=pl.List(pl.String)).alias(name)
        return (
            pl.col(name)
            .cast(pl.List(pl.String))
            .list.drop_nulls()
            .list.unique(maintain_order=True)
            .fill_null(pl.lit([], dtype=pl.List(pl.String)))
        )

    def ts(name: str) -> pl.Expr:
        if name not in schema:
            return pl.lit(None, dtype=_TS).alias(name)
        dtype = schema[name]
        col = pl.col(name)
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is None:
                col = col.dt.replace_time_zone("UTC")
            elif dtype.time_zone != "UTC":
                col = col.dt.convert_time_zone("UTC")
        return col.cast(_TS)

    default = pl.lit(None if severity is None else severity.value, dtype=SEVERITY_DTYPE)
    if "severity" in schema:
        level = pl.col("severity").cast(pl.String).cast(SEVERITY_DTYPE).fill_null(default)
    else:
        level = default.alias("severity")
    if detector is not None:
        name = pl.lit(detector, dtype=pl.String).alias("detector")
    elif "detector" in schema:
        name = pl.col("detector").cast(pl.String)
    else:
        raise FindingsSchemaError("findings need a detector column or a detector id")

    conformed = lf.select(
        name,
        level,
        text("session"),
        text("era"),
        text("title"),
        text("detail"),
        *(ids(name) for name in EVIDENCE_COLUMNS),
        ts("first_ts"),
        ts("last_ts"),
        ids(FINGERPRINT_EXTRA),
    )
    key = pl.struct("detector", "session", "event_ids", "request_ids", FINGERPRINT_EXTRA)
    return conformed.with_columns(
        key.map_batches(_fingerprints, return_dtype=pl.String).alias("fingerprint")
    ).select(FINDINGS_SCHEMA.names())


def validate_findings(df: pl.DataFrame) -> pl.DataFrame:
    """Return `df` unchanged if it is a findings frame, else raise FindingsSchemaError."""
    if df.schema != FINDINGS_SCHEMA:
        want = ", ".join(f"{k}: {v}" for k, v in FINDINGS_SCHEMA.items())
        got = ", ".join(f"{k}: {v}" for k, v in df.schema.items())
        raise FindingsSchemaError(f"findings schema mismatch: want {{{want}}}, got {{{got}}}")
    not_null = ("detector", "severity", "title", "detail", *EVIDENCE_COLUMNS, "fingerprint")
    nulls = [name for name in not_null if df[name].null_count()]
    if nulls:
        raise FindingsSchemaError(f"null values in finding columns: {', '.join(nulls)}")
    return df


#: The report order: worst first, then by detector, session and time. Nulls sort first.
_ORDER: Final = ("severity", "detector", "session", "first_ts", "last_ts", "fingerprint")


def finish_findings(df: pl.DataFrame) -> pl.DataFrame:
    """Sort findings into report order and make every fingerprint unique.

    Two findings whose fingerprints collide (same detector, session and evidence ids) keep the
    first fingerprint for the earliest and get `~2`, `~3`… in time order; the order never
    depends on the order detectors ran in.
    """
    validate_findings(df)
    tie_break = [pl.col(name).list.join("\x1f") for name in EVIDENCE_COLUMNS]
    df = df.sort(
        ["fingerprint", "first_ts", "last_ts", "title", "detail", *tie_break],
        nulls_last=False,
        maintain_order=True,
    )
    ordinal = pl.int_range(pl.len()).over("fingerprint")
    df = df.with_columns(
        pl.when(ordinal == 0)
        .then(pl.col("fingerprint"))
        .otherwise(pl.col("fingerprint") + "~" + (ordinal + 1).cast(pl.String))
        .alias("fingerprint")
    )
    descending = [name == "severity" for name in _ORDER]
    return df.sort(list(_ORDER), descending=descending, nulls_last=False, maintain_order=True)


def _fingerprints(keys: pl.Series) -> pl.Series:
    """Map a struct Series of fingerprint inputs to fingerprints."""
    out = [
        fingerprint(
            row["detector"],
            row["session"],
            event_ids=row["event_ids"],
            request_ids=row["request_ids"],
            extra=row[FINGERPRINT_EXTRA],
        )
        for row in keys.to_list()
    ]
    return pl.Series(out, dtype=pl.String)


def _text(row: Mapping[str, object], name: str) -> str:
    value = row[name]
    if not isinstance(value, str):
        raise FindingsSchemaError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _ids(row: Mapping[str, object], name: str) -> list[str]:
    value = row.get(name)
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise FindingsSchemaError(f"{name} must be a list of str")
    out: dict[str, None] = {}  # a dict keeps first-seen order
    for item in value:
        if not isinstance(item, str):
            raise FindingsSchemaError(f"{name} must hold str, not {type(item).__name__}")
        out[item] = None
    return list(out)


def _ns(value: object) -> int | None:
    """ns since the epoch of a time given as an aware datetime or an int of ns."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise FindingsSchemaError("a time must be a datetime or ns since the epoch")
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise FindingsSchemaError("finding times must be timezone-aware")
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    raise FindingsSchemaError(f"a time must be a datetime or int ns, not {type(value).__name__}")
