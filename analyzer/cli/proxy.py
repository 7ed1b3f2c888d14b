"""`seamwatch proxy`: its options, checked before mitmproxy starts, and the command."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from analyzer.command import UsageError, is_loopback, writable_by_others

__all__ = ["add_proxy_parser"]


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


def _warn(text: str) -> None:
    print(f"seamwatch: warning: {text}", file=sys.stderr, flush=True)


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


def _size(value: str) -> int:
    """`--max-size`: bytes, or a number with K, M, G or T (powers of 1024, as `du -h`)."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    if text[-1:] in _SIZE_UNITS:
        scale, text = _SIZE_UNITS[text[-1]], text[:-1]
    try:
        size = int(float(text) * scale) if text else 0
    except ValueError:
        size = 0
    if size < 1:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M or 20G, got {value!r}")
    return size


_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(value: str) -> int:
    """`--max-age`: seconds, or a number with s, m, h or d."""
    text = value.strip().lower()
    scale = 1
    if text[-1:] in _DURATION_UNITS:
        scale, text = _DURATION_UNITS[text[-1]], text[:-1]
    try:
        seconds = int(float(text) * scale) if text else 0
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 90s, 30m, 6h or 7d, got {value!r}"
        )
    return seconds


def _mode(value: str) -> str:
    """`--mode`: reverse, regular, or upstream:URL (the proxy this one chains to)."""
    if value in ("reverse", "regular"):
        return value
    kind, sep, url = value.partition(":")
    if kind == "upstream" and sep:
        return f"upstream:{_upstream(url)}"
    raise argparse.ArgumentTypeError(f"expected reverse, regular or upstream:URL, got {value!r}")


def _pem(option: str, value: str | None, *, key: bool) -> Path | None:
    """A PEM file given to a TLS option, checked before the proxy starts (UsageError)."""
    if value is None:
        return None
    path = Path(value).expanduser()
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as e:
        raise UsageError(f"{option} {value}: {e.strerror or e}") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise UsageError(f"{option} {value}: no PEM certificate in it")
    if key and "PRIVATE KEY-----" not in text:
        raise UsageError(f"{option} {value}: no private key in it (a PEM with key and chain)")
    return path


def _cmd_proxy(args: argparse.Namespace) -> int:
    from addons import proxy
    from analyzer.capture.writer import CaptureError, prepare_capture_dir

    host, port = args.listen
    mode = args.mode
    if mode == "reverse" and not args.upstream:
        raise UsageError("proxy: --upstream URL is required (or --mode regular|upstream:URL)")
    if mode != "reverse" and args.upstream:
        raise UsageError(
            f"proxy: --upstream is for --mode reverse; --mode {mode} forwards "
            "to whatever origin each client asks for"
        )
    if args.upstream_ca and args.upstream_insecure:
        raise UsageError("proxy: --upstream-ca and --upstream-insecure exclude each other")
    tls = proxy.Tls(
        upstream_ca=_pem("--upstream-ca", args.upstream_ca, key=False),
        upstream_insecure=args.upstream_insecure,
        cert=_pem("--cert", args.cert, key=True),
        ca_dir=Path(args.ca_dir).expanduser() if args.ca_dir else None,
    )
    target = args.upstream if mode == "reverse" else "the origins clients ask for"
    if not is_loopback(host):
        _warn(
            f"the proxy listens on {host}, not loopback: anyone who can reach this address can "
            f"send requests through it to {target}, and they are recorded"
        )
    if args.upstream_insecure:
        _warn(
            "--upstream-insecure: origin certificates are not verified; anyone on the path to "
            "the origin can read and change the traffic"
        )
    out = Path(args.out)
    if writable_by_others(out.expanduser()):
        _warn(
            f"--out {out} is writable by other users: they can add or replace capture files "
            "that analyze will merge with this capture"
        )
    _check_listen(host, port)
    if args.metrics is not None:
        metrics_host, metrics_port = args.metrics
        if (metrics_host, metrics_port) == (host, port):
            raise UsageError("proxy: --metrics must not be the --listen address")
        if not is_loopback(metrics_host):
            _warn(
                f"--metrics listens on {metrics_host}, not loopback: anyone who can reach it "
                "reads the capture's counters"
            )
        _check_listen(metrics_host, metrics_port)
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
    if args.stats_interval < 0:
        raise UsageError("proxy: --stats-interval must be 0 (at exit only) or more seconds")
    argv = proxy.mitmdump_args(
        upstream=args.upstream,
        listen_host=host,
        listen_port=port,
        out=out,
        replica_header=args.replica_header,
        client_header=args.client_header,
        redact=redact,
        mode=mode,
        tls=tls,
        daemon=proxy.Daemon(
            max_bytes=args.max_size,
            max_age_s=args.max_age,
            stats_interval_s=args.stats_interval,
            metrics=args.metrics,
        ),
    )
    scheme = "https" if tls.cert is not None else "http"
    if mode == "reverse":
        what = f"{scheme}://{host}:{port} -> {args.upstream}"
    else:
        ca = (tls.ca_dir or Path("~/.mitmproxy").expanduser()) / "mitmproxy-ca-cert.pem"
        chain = f", chained to {mode.partition(':')[2]}" if mode != "regular" else ""
        what = (
            f"forward proxy on http://{host}:{port}{chain} (clients: HTTPS_PROXY=http://"
            f"{host}:{port}, trusting the CA in {ca})"
        )
    print(f"seamwatch proxy: {what}, capturing to {out}", file=sys.stderr, flush=True)
    return int(proxy.run(argv))


def add_proxy_parser(sub: Any) -> None:
    """The `proxy` subcommand's parser, added to the subcommands `sub`."""
    p = sub.add_parser("proxy", help="record traffic to an MCP server (reverse proxy)")
    p.add_argument("--upstream", type=_upstream, help="the MCP server's base URL (reverse mode)")
    p.add_argument(
        "--mode",
        type=_mode,
        default="reverse",
        metavar="MODE",
        help="reverse (default: in front of --upstream), regular (a forward proxy: clients set "
        "HTTPS_PROXY and trust mitmproxy's CA), or upstream:URL (forward, chained to URL)",
    )
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
    p.add_argument(
        "--upstream-ca",
        metavar="FILE",
        help="PEM of the CA that signed the origin's certificate (default: the system's store)",
    )
    p.add_argument(
        "--upstream-insecure", action="store_true", help="do not verify the origin's certificate"
    )
    p.add_argument(
        "--cert",
        metavar="FILE",
        help="PEM with key and chain: serve TLS to clients with it (default: plain HTTP)",
    )
    p.add_argument(
        "--ca-dir", metavar="DIR", help="mitmproxy's CA folder for --mode regular (~/.mitmproxy)"
    )
    p.add_argument(
        "--max-size",
        type=_size,
        metavar="SIZE",
        help="keep the capture folder within SIZE (500M, 20G): the oldest closed files go",
    )
    p.add_argument(
        "--max-age",
        type=_duration,
        metavar="DURATION",
        help="delete closed capture files older than DURATION (90s, 30m, 6h, 7d)",
    )
    p.add_argument(
        "--stats-interval",
        type=int,
        default=60,
        metavar="SECONDS",
        help="a stats line on stderr this often and at exit (default 60; 0: at exit only)",
    )
    p.add_argument(
        "--metrics",
        type=_listen,
        metavar="HOST:PORT",
        help="serve Prometheus metrics (counts only) on HOST:PORT (loopback when HOST is empty)",
    )
    p.set_defaults(func=_cmd_proxy)
