"""`seamwatch lab matrix`: run a sample of variants through one proxy and judge each by its fault.

One `lab.matrix.server` and one `seamwatch proxy --replica-header X-Served-By` serve the whole
run; each variant is its own session (or, in 2026, its own clientInfo), its wire choices set by
a direct control call before its first request, its tool arguments carrying its name so no two
variants' calls compare equal. The capture is analyzed once; findings go to variants by their
`session` key, which holds the variant's name. Each variant is judged with `lab.verdict.judge`
against `lab.matrix.oracle.expected`, and the confusion table counts, per detector: required and
fired, required and silent (a miss), forbidden and fired (a false alarm: medium or above, or
any resumption finding on a variant that expects nothing). A required detector about the
faulted stream itself (`CITE_FAULTED`) that fired only on other streams of the session counts
as silent: it did not see the fault (the faulted stream is read from the capture,
`faulted_streams`).

Variants share one capture, so nothing one does may read as another's: each has its own
clientInfo (the client of `repeated-tool-call`'s "next session" is its own re-initialization),
its own tool arguments (no repeat across variants), and carries a cursor into another session
(`stale-cursor`) only in the `carried-cursor` family, into its own next session; ids are random
or per-session counters, which `cross-session-replay` leaves alone. The constant-id scheme
shares its one id across sessions, as such a server would.

    <out>/capture/      the one capture     <out>/matrix.json   every variant, expected, found
    <out>/logs/         server and proxy    <out>/lab.json      processes started

(one such directory per batch of 500, `<out>/batch-<k>/`, when a run has more variants).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx

from analyzer.findings import Severity
from lab.framework import Expected, LabContext, LabError, python_argv
from lab.matrix.client import drive
from lab.matrix.oracle import expected
from lab.matrix.variants import Variant
from lab.verdict import Verdict, judge

CONCURRENCY = 6
#: A variant's budget: an early cut answered with nothing waits the long retry four times.
VARIANT_TIMEOUT_S = 60.0
ANALYZE_TIMEOUT_S = 600.0
VARIANT_IN_SESSION = re.compile(r"mx-[0-9a-f]{8}")
EXIT_OK, EXIT_FINDINGS, EXIT_LAB_ERROR = 0, 1, 2
#: Variants a capture holds at most (`run_batches`).
BATCH = 500
#: Detectors whose findings are about the faulted stream itself: a required one must name it
#: in `stream_ids` (DESIGN.md §5 evidence), not only fire somewhere in the session.
CITE_FAULTED = frozenset(
    {
        "causal-gap",
        "counter-reset",
        "cross-replica-resume",
        "duplicate-response",
        "lost-response",
        "phantom-resume",
        "resume-loop",
        "retry-violation",
        "superseded-stream",
        "response-on-get-stream",
    }
)


@dataclass(frozen=True)
class Outcome:
    """One variant's run: what its fault expects, its findings' verdict, or its lab error."""

    variant: Variant
    expected: Expected
    verdict: Verdict | None = None
    error: str | None = None
    #: required detectors (`any_of` groups as `a|b`) that fired, never on the faulted stream
    uncited: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Judged, and no miss, false alarm or uncited detection (evidence ids are not part of
        the matrix's oracle: it names detectors and the faulted stream, not ids)."""
        verdict = self.verdict
        return verdict is not None and not (
            verdict.missing or verdict.unmet_any_of or verdict.unexpected or self.uncited
        )


@dataclass
class Counts:
    """One row of the confusion table."""

    fired: int = 0  # required and fired
    silent: int = 0  # required and silent: a miss
    false_alarm: int = 0  # forbidden and fired


@dataclass(frozen=True)
class MatrixResult:
    """A whole run: outcomes, findings no variant owns, and the wall time."""

    outcomes: list[Outcome]
    unattributed: list[Mapping[str, object]] = field(default_factory=list)
    wall_s: float = 0.0


def confusion(outcomes: Iterable[Outcome]) -> dict[str, Counts]:
    """Per detector (an `any_of` group as `a|b`), the three counts of the table."""
    table: dict[str, Counts] = {}
    for outcome in outcomes:
        verdict = outcome.verdict
        if verdict is None:
            continue
        for det in outcome.expected.required:
            row = table.setdefault(det, Counts())
            if det in verdict.found and det not in outcome.uncited:
                row.fired += 1
            else:
                row.silent += 1
        for group in outcome.expected.any_of:
            name = "|".join(group)
            row = table.setdefault(name, Counts())
            if any(det in verdict.found for det in group) and name not in outcome.uncited:
                row.fired += 1
            else:
                row.silent += 1
        for det in verdict.unexpected:
            table.setdefault(det, Counts()).false_alarm += 1
    return dict(sorted(table.items()))


def exit_code(result: MatrixResult) -> int:
    """2 when a variant failed to run, 1 on a miss or a false alarm, else 0."""
    if any(outcome.error is not None for outcome in result.outcomes):
        return EXIT_LAB_ERROR
    rows = confusion(result.outcomes).values()
    if any(row.silent or row.false_alarm for row in rows) or _loud(result.unattributed):
        return EXIT_FINDINGS
    return EXIT_OK


def _loud(findings: Iterable[Mapping[str, object]]) -> list[Mapping[str, object]]:
    return [f for f in findings if Severity.parse(str(f["severity"])) >= Severity.MEDIUM]


def render(result: MatrixResult, *, seed: int) -> str:
    """The report: seed, count, wall time, the table, and every miss and false alarm."""
    outcomes = result.outcomes
    lines = [
        f"seed {seed}, {len(outcomes)} variants, wall time {result.wall_s:.1f} s",
        "",
        f"{'detector':<34} {'required+fired':>15} {'required+silent':>16} {'forbidden+fired':>16}",
    ]
    for det, row in confusion(outcomes).items():
        lines.append(f"{det:<34} {row.fired:>15} {row.silent:>16} {row.false_alarm:>16}")
    problems = [o for o in outcomes if o.verdict is not None and not o.ok]
    if problems:
        lines += ["", "misses and false alarms:"]
        for outcome in problems:
            assert outcome.verdict is not None
            what = "; ".join(_problems(outcome))
            lines.append(f"  {outcome.variant.name} {what}")
            lines.append(f"      {outcome.variant.axes_text()}")
            lines.append(f"      found: {outcome.verdict.found_text()}")
    loud = _loud(result.unattributed)
    if loud:
        lines += ["", "findings of no variant (medium or above):"]
        lines += [f"  {f['detector']} ({f['severity']}) session {f.get('session')}" for f in loud]
    errors = [o for o in outcomes if o.error is not None]
    if errors:
        lines += ["", f"lab errors ({len(errors)} variants did not run):"]
        for outcome in errors:
            lines.append(f"  {outcome.variant.name} {outcome.error}")
            lines.append(f"      {outcome.variant.axes_text()}")
    return "\n".join(lines)


def _problems(outcome: Outcome) -> list[str]:
    verdict = outcome.verdict
    assert verdict is not None
    out = [f"MISS {det}" for det in verdict.missing]
    out += [f"MISS {' or '.join(group)}" for group in verdict.unmet_any_of]
    out += [f"MISS {det.replace('|', ' or ')} on the faulted stream" for det in outcome.uncited]
    out += [f"FALSE ALARM {det} ({sev.value})" for det, sev in verdict.unexpected.items()]
    return out


def uncited(
    wanted: Expected, findings: Sequence[Mapping[str, object]], stream: str | None
) -> tuple[str, ...]:
    """The required detectors of `CITE_FAULTED` (and `any_of` groups of them, as `a|b`) that
    fired but named `stream`, the faulted stream, in no finding (none when it is unknown)."""
    if stream is None:
        return ()

    def fired(det: str, *, citing: bool) -> bool:
        return any(
            f["detector"] == det and (not citing or stream in _ids(f, "stream_ids"))
            for f in findings
        )

    out = [
        det
        for det in wanted.required
        if det in CITE_FAULTED and fired(det, citing=False) and not fired(det, citing=True)
    ]
    for group in wanted.any_of:
        if not CITE_FAULTED.issuperset(group):
            continue
        if any(fired(d, citing=False) for d in group) and not any(
            fired(d, citing=True) for d in group
        ):
            out.append("|".join(group))
    return tuple(out)


def _ids(finding: Mapping[str, object], key: str) -> list[str]:
    ids = finding.get(key)
    return [str(i) for i in ids] if isinstance(ids, list) else []


def faulted_streams(capture: Path, variants: Sequence[Variant]) -> dict[str, str]:
    """Per variant name, the flow id of the stream its fault hits, read from the capture's
    requests: in its first session (`<name>-1`), the first `tools/call` POST, or, for a
    GET-stream variant and `response-on-get`, the first GET without `Last-Event-ID` (the
    second for `superseded` with one constant id: the cursor resolves to its latest issue,
    the newer stream's, DESIGN.md §2). 2026 variants, whose sessions carry no id, have none."""
    on_get = {v.name for v in variants if not v.owed or v.answer == "response-on-get"}
    skip = {v.name: 1 for v in variants if v.answer == "superseded" and v.ids == "constant"}
    found: dict[str, str] = {}
    for path in sorted(capture.glob("capture-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") != "request":
                continue
            headers = {str(k).lower(): str(v) for k, v in record.get("headers") or []}
            name, _, k = headers.get("mcp-session-id", "").rpartition("-")
            if k != "1" or name in found or "last-event-id" in headers:
                continue
            if name in on_get:
                hit = record.get("method") == "GET" and skip.pop(name, 0) == 0
            else:
                body = (record.get("body") or {}).get("text") or ""
                hit = record.get("method") == "POST" and '"tools/call"' in body
            if hit:
                found[name] = str(record["flow"])
    return found


def attribute(
    variants: Sequence[Variant], findings: Iterable[Mapping[str, object]]
) -> tuple[dict[str, list[Mapping[str, object]]], list[Mapping[str, object]]]:
    """Findings per variant name (by the name in their session key), and the rest."""
    names = {v.name for v in variants}
    owned: dict[str, list[Mapping[str, object]]] = {name: [] for name in names}
    rest: list[Mapping[str, object]] = []
    for finding in findings:
        match = VARIANT_IN_SESSION.search(str(finding.get("session") or ""))
        if match and match.group(0) in names:
            owned[match.group(0)].append(finding)
        else:
            rest.append(finding)
    return owned, rest


def run_batches(variants: Sequence[Variant], out_dir: Path, *, batch: int = BATCH) -> MatrixResult:
    """Run `variants` `batch` at a time, each batch its own server, proxy and capture (in
    `out_dir`, or `out_dir/batch-<k>` when there are several), so a capture stays small enough
    to analyze at once; one result for all."""
    if len(variants) <= batch:
        return run_matrix(variants, out_dir)
    began = time.monotonic()
    outcomes: list[Outcome] = []
    unattributed: list[Mapping[str, object]] = []
    for k, start in enumerate(range(0, len(variants), batch)):
        part = run_matrix(variants[start : start + batch], out_dir / f"batch-{k:04d}")
        outcomes += part.outcomes
        unattributed += part.unattributed
    return MatrixResult(outcomes, unattributed, round(time.monotonic() - began, 1))


def run_matrix(variants: Sequence[Variant], out_dir: Path) -> MatrixResult:
    """Run `variants` through one server and one proxy into `out_dir`, analyze, judge."""
    began = time.monotonic()
    budget = 60.0 + 2.0 * len(variants)
    ctx = LabContext(out_dir, name="matrix", direct=False, budget_s=budget)
    try:
        port = ctx.free_port()
        ctx.start_process(
            python_argv("lab.matrix.server", "--port", str(port)), name="matrix-server", port=port
        )
        root = f"http://127.0.0.1:{port}"
        proxy = ctx.start_proxy(root, replica_header="X-Served-By")
        errors = ctx.run_async(_drive_all, root, proxy + "/mcp", list(variants))
    finally:
        ctx.stop_all()
    findings = analyze(ctx.capture_dir)
    owned, rest = attribute(variants, findings)
    faulted = faulted_streams(ctx.capture_dir, variants)
    outcomes = []
    for variant in variants:
        wanted = expected(variant)
        if variant.name in errors:
            outcomes.append(Outcome(variant, wanted, error=errors[variant.name]))
            continue
        mine = owned[variant.name]
        missed = uncited(wanted, mine, faulted.get(variant.name))
        outcomes.append(Outcome(variant, wanted, verdict=judge(wanted, mine), uncited=missed))
    result = MatrixResult(outcomes, rest, round(time.monotonic() - began, 1))
    _write_record(out_dir, result, owned)
    return result


async def _drive_all(root: str, url: str, variants: list[Variant]) -> dict[str, str]:
    """Play every variant, a few at a time; returns the lab error of each that failed."""
    errors: dict[str, str] = {}
    limit = anyio.Semaphore(CONCURRENCY)

    async def one(variant: Variant) -> None:
        async with limit:
            try:
                with anyio.fail_after(VARIANT_TIMEOUT_S):
                    async with httpx.AsyncClient(timeout=10.0) as http:
                        registered = await http.post(f"{root}/lab/variant", json=variant.to_json())
                        registered.raise_for_status()
                        await drive(http, url, variant)
            except Exception as exc:  # any failure is this variant's lab error, reported
                errors[variant.name] = f"{type(exc).__name__}: {exc}"[:300]

    async with anyio.create_task_group() as group:
        for variant in variants:
            group.start_soon(one, variant)
    return errors


def analyze(capture: Path) -> list[Mapping[str, object]]:
    """`seamwatch analyze --format json` of the capture (a subprocess, as a user runs it)."""
    argv = python_argv("analyzer.cli", "analyze", str(capture), "--format", "json")
    try:
        done = subprocess.run(
            [*argv, "--fail-on", "none"], capture_output=True, timeout=ANALYZE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"the analysis took over {ANALYZE_TIMEOUT_S:g} s") from exc
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip()[-300:]
        raise LabError(f"the analysis exited {done.returncode}: {tail}")
    report = json.loads(done.stdout)
    findings: list[Mapping[str, object]] = report["findings"]
    return findings


def _write_record(
    out_dir: Path, result: MatrixResult, owned: Mapping[str, list[Mapping[str, object]]]
) -> None:
    record = {
        "wall_s": result.wall_s,
        "variants": [
            {
                "name": o.variant.name,
                "axes": o.variant.to_json(),
                "expected": o.expected.to_json(),
                "error": o.error,
                "found": {d: s.value for d, s in (o.verdict.found if o.verdict else {}).items()},
                "ok": o.ok,
                "uncited": list(o.uncited),
                "findings": [
                    {k: f.get(k) for k in ("detector", "severity", "session", "title")}
                    for f in owned.get(o.variant.name, [])
                ],
            }
            for o in result.outcomes
        ],
        "unattributed": [
            {k: f.get(k) for k in ("detector", "severity", "session", "title")}
            for f in result.unattributed
        ],
    }
    (out_dir / "matrix.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
