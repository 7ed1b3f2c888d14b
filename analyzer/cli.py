"""The `seamwatch` command line (DESIGN.md §6)."""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from analyzer import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad usage or unreadable input: exit 2 with a one-line reason."""


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    if not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} of {value!r} is not in 1-65535")
    return (host.strip("[]") or "127.0.0.1"), int(port)


_UPSTREAM_FORM = "expected scheme://host[:port]"


def _upstream(value: str) -> str:
    """`--upstream`: an http(s) origin, returned as `scheme://host[:port]` in lower case without
    a trailing `/`, the only form mitmproxy's reverse mode takes."""
    parts = urlsplit(value)  # the scheme comes back in lower case: HTTP:// is http://
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an http(s) URL, got {value!r}")
    if "@" in parts.netloc:
        # Not echoed whole: the part before @ may be a password.
        shown = f"{parts.scheme}://...@{parts.netloc.rpartition('@')[2]}"
        raise argparse.ArgumentTypeError(
            f"{_UPSTREAM_FORM}, got {shown!r}: drop the user name and password"
        )
    try:
        port = parts.port  # None when absent; ValueError when not a number or above 65535
    except ValueError:
        port = 0
    if port == 0:
        raise argparse.ArgumentTypeError(f"the port of {value!r} is not a number in 1-65535")
    rest = parts.path
    if parts.query:
        rest += f"?{parts.query}"
    if parts.fragment:
        rest += f"#{parts.fragment}"
    if rest not in ("", "/"):
        raise argparse.ArgumentTypeError(
            f"{_UPSTREAM_FORM}, got {value!r}: the proxy forwards every path; drop {rest!r}"
        )
    from mitmproxy.net.check import is_valid_host  # what its reverse mode checks the host with

    host = parts.hostname  # in lower case
    if not is_valid_host(host):
        raise argparse.ArgumentTypeError(f"{host!r} in {value!r} is not a host name")
    origin = f"{parts.scheme}://[{host}]" if ":" in host else f"{parts.scheme}://{host}"
    return origin if port is None else f"{origin}:{port}"


def _check_listen(host: str, port: int) -> None:
    """UsageError when the proxy could not listen on host:port (in use, no such address).

    Binds as asyncio's server will (every address the host resolves to, SO_REUSEADDR), then
    lets go, so the user gets one line instead of mitmproxy's hint, whose `--mode` option
    seamwatch does not have.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as e:
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    for family, kind, proto, _name, address in infos:
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:
            continue  # a family this machine lacks; asyncio skips it as well
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as e:
                reason = "address in use" if e.errno == errno.EADDRINUSE else e.strerror or e
                raise UsageError(f"cannot listen on {host}:{port}: {reason}") from None


def _cmd_proxy(args: argparse.Namespace) -> int:
    from addons import proxy
    from analyzer.capture.writer import CaptureError, prepare_capture_dir

    host, port = args.listen
    _check_listen(host, port)
    out = Path(args.out)
    try:
        # Before the proxy listens: one line instead of mitmproxy's traceback and exit 1.
        prepare_capture_dir(out.expanduser())
    except CaptureError as e:
        raise UsageError(f"--out: {e}") from None
    if not args.no_redact:
        redact = True
    else:
        print("seamwatch: --no-redact: credentials will be written to disk", file=sys.stderr)
        redact = False
    argv = proxy.mitmdump_args(
        upstream=args.upstream,
        listen_host=host,
        listen_port=port,
        out=out,
        replica_header=args.replica_header,
        client_header=args.client_header,
        redact=redact,
    )
    print(
        f"seamwatch proxy: http://{host}:{port} -> {args.upstream}, capturing to {out}",
        file=sys.stderr,
        flush=True,
    )
    return int(proxy.run(argv))


def _cmd_analyze(args: argparse.Namespace) -> int:
    from analyzer.report.run import analyze_command

    return analyze_command(args)


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
    from dashboards.launch import launch

    return int(launch(args.paths, port=args.port, address=args.address))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="seamwatch",
        description="Find where MCP Streamable HTTP streams break and resume badly.",
    )
    parser.add_argument("--version", action="version", version=f"seamwatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("proxy", help="record traffic to an MCP server (reverse proxy)")
    p.add_argument("--upstream", required=True, type=_upstream, help="the MCP server's base URL")
    p.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 8080),
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:8080)",
    )
    p.add_argument(
        "--out", default="seamwatch-capture", help="capture directory (default seamwatch-capture)"
    )
    p.add_argument("--replica-header", metavar="NAME", help="response header naming the replica")
    p.add_argument("--client-header", metavar="NAME", help="request header naming the client")
    p.add_argument("--no-redact", action="store_true", help="write credentials to disk unredacted")
    p.set_defaults(func=_cmd_proxy)

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
    a.add_argument("--config", metavar="FILE", help="TOML detector thresholds")
    a.add_argument("--only", metavar="IDS", help="comma-separated detector ids to run")
    a.add_argument("--disable", metavar="IDS", help="comma-separated detector ids to skip")
    a.add_argument("--replica-header", metavar="NAME", help="replica header in dumps and HAR")
    a.add_argument("--client-header", metavar="NAME", help="client header for 2026 traffic")
    a.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    a.add_argument("--otlp-payloads", action="store_true", help=_OTLP_PAYLOADS_HELP)
    a.set_defaults(func=_cmd_analyze)

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
    # Polars' allocator (jemalloc) keeps freed pages for reuse by default; returning them at
    # once lowers the peak RSS of an analysis that builds and drops many frames. Read when
    # polars loads, so set before anything imports it (and never over the user's own value).
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
    # The streaming engine's joins first buffer both inputs to pick a build side; by default
    # that sample can take most of a scan of every event or payload. A small sample still
    # finds the small side (the key sets detectors join on) and streams the large one.
    os.environ.setdefault("POLARS_JOIN_SAMPLE_LIMIT", "10000")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "lab":
        # REMAINDER takes nothing when the lab's arguments start with an option (`lab --help`):
        # argparse leaves those, and all after them, unrecognized, in order. They are the lab's.
        args.lab_args = [*rest, *args.lab_args]
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        code: int = args.func(args)
    except UsageError as e:
        print(f"seamwatch: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
