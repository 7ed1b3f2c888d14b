"""`seamwatch lab list`, `seamwatch lab run SCENARIO|--all --out DIR` (DESIGN.md §6) and
`seamwatch lab matrix [--sample N | --all] [--seed S] [--out DIR]` (`lab.matrix`).

The top-level CLI hands everything after `lab` to `main(argv)`. Exit 0 on success, 2 with a
one-line reason on bad usage, an unknown scenario or a scenario that could not run. `matrix`
exits 1 when a detector missed a required finding or fired where its fault forbids it, and 2
when a variant could not run.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lab.framework import DEFAULT_BUDGET_S, LabError, Scenario, prepare_out_dir, run_scenario
from lab.matrix.run import exit_code, render, run_batches
from lab.matrix.variants import all_variants, sample
from lab.scenarios import SCENARIOS, by_name

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_SAMPLE = 40
#: Past this a sample draws too few new variants per try: `--all` walks them instead.
MAX_SAMPLE = 20_000


class _Parser(argparse.ArgumentParser):
    """argparse that raises `_Usage` on bad usage instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Usage(message)


class _Usage(Exception):
    """Bad usage: exit 2 with this one-line reason."""


def _budget(value: str) -> float:
    """`--budget`: a positive, finite number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="seamwatch lab", description="Run the fault-injection lab.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list the scenarios: name and description, one a line")
    run = sub.add_parser("run", help="run scenarios into DIR/<name>/")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("scenario", nargs="?", metavar="SCENARIO", help="one scenario by name")
    which.add_argument("--all", action="store_true", help="every scenario, in list order")
    run.add_argument("--out", required=True, metavar="DIR", help="where scenario dirs go")
    run.add_argument(
        "--budget",
        type=_budget,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"time each scenario may take (default {DEFAULT_BUDGET_S:g})",
    )
    run.add_argument(
        "--direct",
        action="store_true",
        help="development only: skip the seamwatch proxy (nothing is captured)",
    )
    matrix = sub.add_parser(
        "matrix", help="run a sample of the variation matrix and print its confusion table"
    )
    size = matrix.add_mutually_exclusive_group()
    size.add_argument(
        "--sample", type=_count, default=DEFAULT_SAMPLE, metavar="N", help="variants to run"
    )
    size.add_argument("--all", action="store_true", help="every variant (nightly-sized)")
    matrix.add_argument("--seed", type=int, help="sampling seed (default: a random one)")
    matrix.add_argument("--out", metavar="DIR", help="where the run goes (default: a temp dir)")
    return parser


def _count(value: str) -> int:
    """`--sample`: a positive whole number."""
    if not value.isdigit() or not 1 <= int(value) <= MAX_SAMPLE:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_SAMPLE} (--all runs every variant), "
            f"got {value!r}"
        )
    return int(value)


def _matrix(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    try:
        variants = list(all_variants()) if args.all else sample(args.sample, seed)
    except ValueError as exc:
        raise _Usage(f"--sample: {exc}") from None
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="seamwatch-matrix-"))
    try:
        prepare_out_dir(out)
    except LabError as exc:
        raise _Usage(f"--out {exc}") from None
    if any((out / "capture").glob("*")) or any(out.glob("batch-*")):
        raise _Usage(f"--out {out} already holds a capture; give a new directory")
    print(f"seamwatch lab matrix: seed {seed}, {len(variants)} variants, into {out}", flush=True)
    try:
        result = run_batches(variants, out)
    except LabError as exc:
        reason = " ".join(str(exc).split())
        print(f"seamwatch lab: matrix failed: {reason}", file=sys.stderr)
        return EXIT_USAGE
    print(render(result, seed=seed), flush=True)
    return exit_code(result)


def _selected(args: argparse.Namespace) -> list[Scenario]:
    if args.all:
        return list(SCENARIOS)
    scenario = by_name(args.scenario)
    if scenario is None:
        names = ", ".join(s.name for s in SCENARIOS)
        raise _Usage(f"unknown scenario {args.scenario!r} (known: {names})")
    return [scenario]


def main(argv: Sequence[str]) -> int:
    """Run `seamwatch lab ...`; returns the exit code."""
    try:
        args = _parser().parse_args(list(argv))
        if args.command == "list":
            width = max((len(s.name) for s in SCENARIOS), default=0)
            for scenario in SCENARIOS:
                print(f"{scenario.name:<{width}}  {scenario.description}")
            return EXIT_OK
        if args.command == "matrix":
            return _matrix(args)
        scenarios = _selected(args)
        try:
            prepare_out_dir(Path(args.out))
        except LabError as exc:
            raise _Usage(f"--out {exc}") from None
    except _Usage as exc:
        print(f"seamwatch lab: {exc}", file=sys.stderr)
        return EXIT_USAGE
    failed = 0
    for scenario in scenarios:  # with --all, one failure does not stop the others
        try:
            directory = run_scenario(
                scenario, Path(args.out), budget_s=args.budget, direct=args.direct
            )
        except LabError as exc:
            failed += 1
            reason = " ".join(str(exc).split())
            print(f"seamwatch lab: {scenario.name} failed: {reason}", file=sys.stderr)
            continue
        print(f"{scenario.name}\t{directory}", flush=True)
    return EXIT_USAGE if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
