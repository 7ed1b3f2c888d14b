"""The `seamwatch` command line (DESIGN.md §6)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from analyzer import UserError, __version__
from analyzer.cli.proxy import add_proxy_parser
from analyzer.command import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    is_loopback,
    one_line,
    writable_by_others,
)
from analyzer.memory import analysis_defaults, inputs_bytes

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "is_loopback",
    "main",
    "writable_by_others",
]


def _cmd_analyze(args: argparse.Namespace) -> int:
    from analyzer.cli.analyze import analyze_command

    return analyze_command(args)


def _cmd_baseline_write(args: argparse.Namespace) -> int:
    from analyzer.cli.analyze import baseline_write_command

    return baseline_write_command(args)


def _cmd_export(args: argparse.Namespace) -> int:
    from analyzer.otlp.command import export_command

    return export_command(args)


_OTLP_PAYLOADS_HELP = "OTLP: add tool-call arguments and results (as captured, redacted)"


def _cmd_lab(args: argparse.Namespace) -> int:
    from lab.cli import main as lab_main

    return int(lab_main(args.lab_args))


def _cmd_demo(args: argparse.Namespace) -> int:
    from lab.demo import main as demo_main

    return int(demo_main(Path(args.out) if args.out else None))


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from analyzer.cli.analyze import detector_options
    from dashboards.launch import launch

    detector_options(args)  # a bad --only, --disable or --config: exit 2 before the server
    options = {
        name: getattr(args, name)
        for name in ("config", "only", "disable", "replica_header", "client_header")
        if getattr(args, name)
    }
    if args.no_cache:
        options["no_cache"] = "true"
    return int(launch(args.paths, port=args.port, address=args.address, options=options))


def _analysis_options(p: argparse.ArgumentParser) -> None:
    """The options that decide what an analysis finds: one set for analyze, baseline write and
    the dashboard, so each shows what the others report."""
    p.add_argument("--config", metavar="FILE", help="TOML detector thresholds")
    p.add_argument("--only", metavar="IDS", help="comma-separated detector ids to run")
    p.add_argument("--disable", metavar="IDS", help="comma-separated detector ids to skip")
    p.add_argument("--replica-header", metavar="NAME", help="replica header in dumps and HAR")
    p.add_argument("--client-header", metavar="NAME", help="client header for 2026 traffic")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (DESIGN.md §6: exit 2 with a one-line reason)
    instead of the usage block and the error under it; `-h` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        reason = message.replace("\n", " ")
        self.exit(EXIT_USAGE, f"{self.prog}: error: {reason}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="seamwatch",
        description="Find where MCP Streamable HTTP streams break and resume badly.",
    )
    parser.add_argument("--version", action="version", version=f"seamwatch {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error (exit 3), print its traceback on stderr",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_proxy_parser(sub)

    a = sub.add_parser("analyze", help="analyze captures, dumps or HAR files")
    a.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a capture directory or file, a mitmproxy dump or a .har; several are merged",
    )
    a.add_argument(
        "--format",
        choices=("table", "json", "junit", "sarif", "otlp-json"),
        default="table",
        help="report format (default table; otlp-json: the timelines as OTLP traces)",
    )
    a.add_argument("--out", metavar="FILE", help="write the report here instead of stdout")
    a.add_argument(
        "--fail-on",
        default="medium",
        metavar="SEVERITY|none",
        help="exit 1 when a finding is at or above this severity (default medium; none: never)",
    )
    a.add_argument(
        "--baseline",
        metavar="FILE",
        help="findings recorded in this baseline are reported as baselined, never failed on",
    )
    _analysis_options(a)
    a.add_argument("--otlp-payloads", action="store_true", help=_OTLP_PAYLOADS_HELP)
    a.add_argument(
        "--engine",
        choices=("polars", "spark"),
        default="polars",
        help="polars: this machine (default); spark: Apache Spark, for a fleet's captures "
        "(pip install 'seamwatch[spark]', Java 17; docs/spark.md)",
    )
    a.add_argument(
        "--master",
        metavar="URL",
        help="the Spark master with --engine spark (default local[2]; spark://, yarn, k8s://)",
    )
    a.add_argument(
        "--cache-dir",
        metavar="URI",
        help="where --engine spark keeps its cache, bucketed by session (any URI Spark writes; "
        "default in local mode: .seamwatch-cache/ beside the first input; docs/spark.md)",
    )
    a.set_defaults(func=_cmd_analyze)

    b = sub.add_parser("baseline", help="accept today's findings, fail only on new ones")
    b_sub = b.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    bw = b_sub.add_parser("write", help="record the current findings' fingerprints")
    bw.add_argument("paths", nargs="+", metavar="PATH", help="inputs, as analyze takes them")
    bw.add_argument("--out", required=True, metavar="FILE", help="the baseline file to write")
    bw.add_argument("--reason", metavar="TEXT", help="why these findings are accepted")
    _analysis_options(bw)
    bw.set_defaults(func=_cmd_baseline_write)

    e = sub.add_parser("export", help="send the timelines as OTLP traces (OTLP/HTTP)")
    e.add_argument("paths", nargs="+", metavar="PATH", help="inputs, as for analyze")
    e.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="OTLP/HTTP receiver (an origin gets /v1/traces; default: OTEL_EXPORTER_OTLP_*)",
    )
    e.add_argument("--otlp-payloads", action="store_true", help=_OTLP_PAYLOADS_HELP)
    e.add_argument("--replica-header", metavar="NAME", help="replica header in dumps and HAR")
    e.add_argument("--client-header", metavar="NAME", help="client header for 2026 traffic")
    e.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    e.set_defaults(func=_cmd_export)

    d = sub.add_parser("dashboard", help="browse sessions and findings in a browser")
    d.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="capture directories or files, mitmproxy dumps or .har files to browse (several "
        "are merged into one analysis, as by analyze)",
    )
    d.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    d.add_argument(
        "--address",
        default="127.0.0.1",
        metavar="HOST",
        help="address to serve on (default 127.0.0.1; a non-loopback one warns: no login)",
    )
    _analysis_options(d)
    d.set_defaults(func=_cmd_dashboard)

    # The lab parses its own arguments (lab/cli.py), `--help` included: see `main`.
    lab = sub.add_parser("lab", help="run the fault-injection lab", add_help=False)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER)
    lab.set_defaults(func=_cmd_lab)

    demo = sub.add_parser("demo", help="run the lab scenarios and analyze them")
    demo.add_argument("--out", metavar="DIR", help="where to keep the scenarios' captures")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `seamwatch` command."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    # Before anything imports Polars (parsing the arguments does not): its allocator reads
    # the settings once.
    analysis_defaults(inputs_bytes(getattr(args, "paths", None) or ()))
    if args.command == "lab":
        # REMAINDER takes nothing when the lab's arguments start with an option (`lab --help`):
        # argparse leaves those, and all after them, unrecognized, in order. They are the lab's.
        args.lab_args = [*rest, *args.lab_args]
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        code: int = args.func(args)
    except UserError as e:  # bad usage, unreadable input, a config or baseline that cannot be used
        print(f"seamwatch: {one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: exit 3, never 1 ("findings") and never a bare traceback
        _internal_error(e, debug=args.debug, out=getattr(args, "out", None))
        return EXIT_INTERNAL
    return code


def _internal_error(error: Exception, *, debug: bool, out: str | None) -> None:
    """Say in one line what failed and where; the traceback goes to a file (or, `--debug`,
    to stderr) so CI can tell a broken tool (exit 3) from a failed check (exit 1)."""
    text = "".join(traceback.format_exception(error))
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    first = (str(error).strip().splitlines() or [""])[0]
    what = f"{type(error).__name__}: {first}" if first else type(error).__name__
    if debug:
        sys.stderr.write(text)
        told = "traceback above"
    else:
        path = _traceback_file(text, out)
        told = f"traceback in {path}" if path else "rerun with --debug for the traceback"
    print(f"seamwatch: internal error: {what}{where}; {told}", file=sys.stderr)


def _traceback_file(text: str, out: str | None) -> Path | None:
    """Write a traceback beside the report (`--out`), else in the temporary folder; its path,
    or None when neither can take it."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    candidates = [Path(out).parent] if out else []
    candidates.append(Path(tempfile.gettempdir()))
    for folder in candidates:
        path = folder / f"seamwatch-error-{stamp}-{os.getpid()}.txt"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    return None
