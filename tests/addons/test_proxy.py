import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from mitmproxy.net import server_spec
from prometheus_client.parser import text_string_to_metric_families

from addons.proxy import CAPTURE_ADDON, mitmdump_args
from analyzer.analysis import read_timeline
from analyzer.cli import build_parser, main
from tests.support.disk import small_disk
from tests.support.origin import Origin, Script
from tests.support.proxy import ROOT, free_port, read_records, run_proxy, wait_port
from tests.support.tls import CertAuthority, make_ca, sdk_client, sdk_server, tls_sdk_server


def test_mitmdump_args_run_the_capture_addon_in_reverse_mode() -> None:
    args = mitmdump_args(
        upstream="http://127.0.0.1:9000",
        listen_host="127.0.0.1",
        listen_port=8080,
        out=Path("cap"),
        replica_header="X-Served-By",
    )
    assert "-s" not in args  # `proxy.run` adds the addon itself
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    assert len(sets) * 2 == len(args)  # all in one update: the capture opens in it
    assert "mode=reverse:http://127.0.0.1:9000" in sets
    assert "listen_host=127.0.0.1" in sets
    assert "listen_port=8080" in sets
    assert "seamwatch_dir=cap" in sets
    assert "seamwatch_redact=true" in sets
    assert "seamwatch_replica_header=X-Served-By" in sets
    assert not any(s.startswith("seamwatch_client_header") for s in sets)


def test_no_redact_must_be_asked_for() -> None:
    args = mitmdump_args(
        upstream="http://h:1", listen_host="127.0.0.1", listen_port=1, out=Path("c"), redact=False
    )
    assert "seamwatch_redact=false" in args


def test_proxy_defaults_to_loopback() -> None:
    ns = build_parser().parse_args(["proxy", "--upstream", "http://127.0.0.1:9000"])
    assert ns.listen == ("127.0.0.1", 8080)


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "--upstream", "ftp://x"],
        ["proxy", "--upstream", "http://x", "--listen", "nope"],
        ["proxy", "--upstream", "http://x", "--listen", "h:99999"],
        ["proxy", "--upstream", "http://x", "--listen", "h:0"],
        ["proxy", "--upstream", "http://127.0.0.1:99999"],
        ["proxy", "--upstream", "http://127.0.0.1:notaport"],
        ["proxy", "--upstream", "http://127.0.0.1:0/mcp"],
        ["proxy", "--upstream", "http://127.0.0.1:-1"],
        ["proxy", "--mode", "transparent"],
        ["proxy", "--mode", "upstream:ftp://x"],
        ["proxy", "--upstream", "http://x", "--max-size", "lots"],
        ["proxy", "--upstream", "http://x", "--max-size", "0"],
        ["proxy", "--upstream", "http://x", "--max-age", "-5m"],
        ["proxy", "--upstream", "http://x", "--metrics", "nope"],
    ],
)
def test_bad_proxy_usage_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--max-size", "500M"], "max_size", 500 << 20),
        (["--max-size", "1.5g"], "max_size", 3 << 29),
        (["--max-size", "4096"], "max_size", 4096),
        (["--max-age", "90s"], "max_age", 90),
        (["--max-age", "6h"], "max_age", 6 * 3600),
        (["--max-age", "2d"], "max_age", 2 * 86400),
        (["--max-age", "45"], "max_age", 45),
        (["--mode", "regular"], "mode", "regular"),
        (
            ["--mode", "upstream:HTTP://Proxy.Internal:3128/"],
            "mode",
            "upstream:http://proxy.internal:3128",
        ),
        (["--metrics", ":9464"], "metrics", ("127.0.0.1", 9464)),
        ([], "stats_interval", 60),
    ],
)
def test_daemon_options_parse_to_what_the_proxy_takes(
    argv: list[str], field: str, value: object
) -> None:
    ns = build_parser().parse_args(["proxy", *argv])
    assert getattr(ns, field) == value


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["proxy"], "--upstream URL is required"),
        (["proxy", "--mode", "regular", "--upstream", "http://x"], "--upstream is for --mode"),
        (["proxy", "--upstream", "http://x", "--cert", "missing.pem"], "--cert missing.pem"),
        (["proxy", "--upstream", "http://x", "--cert", "{ca}"], "no private key in it"),
        (["proxy", "--upstream", "http://x", "--upstream-ca", "{key}"], "no PEM certificate"),
        (
            ["proxy", "--upstream", "http://x", "--upstream-ca", "{ca}", "--upstream-insecure"],
            "exclude each other",
        ),
    ],
)
def test_bad_tls_and_mode_usage_is_one_line_and_exit_2(
    argv: list[str],
    said: str,
    test_ca: tuple[CertAuthority, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ca, pki = test_ca
    paths = {"ca": str(ca.cert_path), "key": str(pki / "origin-key.pem")}
    assert main([arg.format(**paths) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize(
    ("value", "upstream"),
    [
        ("http://127.0.0.1:18901", "http://127.0.0.1:18901"),
        ("http://127.0.0.1:18901/", "http://127.0.0.1:18901"),
        ("HTTP://127.0.0.1:18901", "http://127.0.0.1:18901"),
        ("HttpS://Mcp.Example", "https://mcp.example"),
        ("http://127.0.0.1:/", "http://127.0.0.1"),
        ("http://[::1]:9000/", "http://[::1]:9000"),
        ("http://mcp_1.internal.:9000", "http://mcp_1.internal.:9000"),
    ],
)
def test_an_accepted_upstream_is_one_mitmproxy_takes(value: str, upstream: str) -> None:
    ns = build_parser().parse_args(["proxy", "--upstream", value])
    assert ns.upstream == upstream
    scheme, _address = server_spec.parse(ns.upstream, "http")  # would raise otherwise
    assert scheme == upstream.split(":")[0]


@pytest.mark.timeout(60)
def test_a_listen_port_in_use_is_one_seamwatch_line(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-m", "analyzer.cli", "proxy", "--upstream", "http://127.0.0.1:1"]
        cmd += ["--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "cap")]
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=45)
    assert done.returncode == 2
    assert done.stderr == f"seamwatch: cannot listen on 127.0.0.1:{port}: address in use\n"
    assert not (tmp_path / "cap").exists()  # nothing started, nothing recorded


def _wait_for(check: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise


@pytest.mark.proxy
@pytest.mark.timeout(90)
@pytest.mark.parametrize("launcher", ["seamwatch proxy", "mitmdump -s"])
def test_nothing_in_the_folder_the_proxy_starts_from_is_imported(
    launcher: str, tmp_path: Path
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    marker = tmp_path / "planted-ran"
    (here / "queue.py").write_text(
        f"open({str(marker)!r}, 'a').write(__name__)\nraise ImportError('planted')\n"
    )
    out, port = here / "cap", free_port()
    if launcher == "seamwatch proxy":
        # -P: this test's own interpreter imports nothing from here either (as the console
        # script would not); only the capture worker could.
        cmd = [sys.executable, "-P", "-m", "analyzer.cli", "proxy"]
        cmd += ["--listen", f"127.0.0.1:{port}", "--out", "cap", "--upstream"]
    else:
        mitmdump = Path(sys.executable).with_name("mitmdump")
        if not mitmdump.exists():
            pytest.skip("no mitmdump next to this interpreter")
        cmd = [str(mitmdump), "-s", str(CAPTURE_ADDON), "--listen-port", str(port)]
        cmd += ["--listen-host", "127.0.0.1", "--set", "seamwatch_dir=cap", "--mode"]
    with Origin() as origin:
        origin.scripts["/json"] = Script(writes=[b"{}"], chunked=False)
        upstream = origin.url if launcher == "seamwatch proxy" else f"reverse:{origin.url}"
        proc = subprocess.Popen(
            [*cmd, upstream],
            cwd=here,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_port(port, proc)
            _wait_for(lambda: list(out.glob("capture-*")) or proc.poll() is not None)
            assert httpx.get(f"http://127.0.0.1:{port}/json", timeout=10).text == "{}"
        finally:
            _stop(proc)
    assert not marker.exists()
    kinds = [r["kind"] for r in read_records(out)]
    assert kinds[0] == "capture_open" and kinds[-1] == "capture_close"
    assert kinds.count("request") == 1 and kinds.count("response") == 1


@pytest.mark.proxy
@pytest.mark.timeout(90)
def test_a_dead_worker_is_one_line_at_once_then_a_count_and_exit_1(tmp_path: Path) -> None:
    out, port, err = tmp_path / "cap", free_port(), tmp_path / "stderr"
    with Origin() as origin, err.open("wb") as err_file:
        origin.scripts["/json"] = Script(writes=[b"{}"], chunked=False)
        cmd = [sys.executable, "-m", "analyzer.cli", "proxy", "--upstream", origin.url]
        cmd += ["--listen", f"127.0.0.1:{port}", "--out", str(out)]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err_file)
        try:
            wait_port(port, proc)
            assert list(out.glob("capture-*"))  # open before the proxy listens
            # The worker is this proxy's one child process.
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            (worker,) = children
            os.kill(int(worker), signal.SIGKILL)
            died = (
                f"seamwatch: capture worker died (killed by SIGKILL): recording to {out} "
                "stopped; traffic still passes"
            )
            _wait_for(lambda: died in err.read_text())
            assert err.read_text().splitlines()[1:] == [died]  # before any traffic, alone
            with httpx.Client(timeout=10) as client:
                for _ in range(3):  # the traffic still passes
                    assert client.get(f"http://127.0.0.1:{port}/json").text == "{}"
        finally:
            code = _stop(proc, signal.SIGINT)
    assert code == 1
    assert err.read_text().splitlines()[1:] == [
        died,
        f"seamwatch: capture in {out} is incomplete: 9 records after the worker died were "
        "not recorded",
    ]


@pytest.mark.proxy
@pytest.mark.timeout(120)
def test_a_full_disk_under_the_proxy_is_said_retried_counted_and_exit_1(tmp_path: Path) -> None:
    """The real proxy capturing to a real 1 MiB filesystem: it fills (said at once), frees
    space (the held records are written, said), fills for good (what is still held at close
    is given up, counted in `dropped`, said) and the proxy exits 1; the analysis rates the
    loss high, so the default gate fails. Every request passes throughout."""
    port, err = free_port(), tmp_path / "stderr"
    body = b"x" * 60_000
    with small_disk(tmp_path / "disk", "1m") as disk, Origin() as origin, err.open("wb") as e:
        out = disk / "cap"
        filler = disk / "filler"
        filler.write_bytes(bytes(600_000))
        origin.scripts["/mcp"] = Script(writes=[b"{}"], chunked=False)
        cmd = [sys.executable, "-m", "analyzer.cli", "proxy", "--upstream", origin.url]
        cmd += ["--listen", f"127.0.0.1:{port}", "--out", str(out)]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e)
        try:
            wait_port(port, proc)
            full = "seamwatch: cannot write the capture file "
            with httpx.Client(timeout=10) as client:

                def post(n: int) -> None:
                    for _ in range(n):
                        assert (
                            client.post(f"http://127.0.0.1:{port}/mcp", content=body).text == "{}"
                        )

                post(12)  # ~720 KB of bodies where ~400 KB are free
                _wait_for(lambda: full in err.read_text())
                assert proc.poll() is None  # said at once, while the proxy runs
                filler.unlink()  # room again: what was held is written
                _wait_for(lambda: "again after" in err.read_text())
                post(28)  # ~1.7 MB more: the disk fills for good
                _wait_for(lambda: err.read_text().count(full) == 2)
        finally:
            code = _stop(proc, signal.SIGINT)
        lines = err.read_text().splitlines()[1:]
        said = [line for line in lines if not line.startswith("seamwatch: stats: ")]
        records = read_records(out)
        analyzed = subprocess.run(
            [
                sys.executable,
                "-m",
                "analyzer.cli",
                "analyze",
                "--no-cache",
                "--format=json",
                str(out),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert code == 1
    assert lines[-2].startswith("seamwatch: stats: exchanges=40 ")  # the worker's, at exit
    assert [line.split(" ", 3)[:3] for line in said] == [
        ["seamwatch:", "cannot", "write"],
        ["seamwatch:", "capture", "writing"],
        ["seamwatch:", "cannot", "write"],
        ["seamwatch:", "capture", "lost"],
        ["seamwatch:", "capture", "in"],
    ]
    assert said[1].endswith("held record(s) written") and " 0 held" not in said[1]
    assert said[3].endswith("(No space left on device; the capture was closed)")
    assert said[4] == (
        f"seamwatch: capture in {out} is incomplete: records that could not be written were "
        "lost (counted in its capture_stats as dropped)"
    )
    lost = int(said[3].split()[3])
    final = records[-1]
    assert final["kind"] == "capture_close" and final["dropped"] == lost > 0
    assert final["seen"] == final["written"] + final["dropped"]
    # What reached disk: whole records in seq order; the loss is in dropped alone.
    assert [r["seq"] for r in records] == list(range(len(records)))
    requests = sum(r["kind"] == "request" for r in records)
    print(
        f"full disk: seen {final['seen']}, written {final['written']}, lost {lost}, "
        f"requests on disk {requests} of 40"
    )
    assert analyzed.returncode == 1, analyzed.stderr
    report = json.loads(analyzed.stdout)
    health = [f for f in report["findings"] if f["detector"] == "capture-health"]
    assert [f["severity"] for f in health] == ["high"]
    assert f"{lost} record(s) dropped by the capture writer" in health[0]["title"]
    assert "gaps in seq" not in health[0]["title"]


def _analyze(out: Path) -> tuple[int, dict[str, Any]]:
    """`seamwatch analyze --format json` of a capture: its exit code and report."""
    done = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "analyze", "--no-cache", "--format=json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertAuthority, Path]:
    """A test CA, and a folder holding `origin-*.pem` and `front.pem` certificates it signed."""
    folder = tmp_path_factory.mktemp("pki")
    ca = make_ca(folder)
    ca.issue(folder, "origin")
    ca.issue(folder, "front")
    return ca, folder


@pytest.mark.proxy
@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("trust", "verified"),
    [("--upstream-ca", True), ("system store", False), ("--upstream-insecure", True)],
)
def test_a_tls_origin_is_verified_against_the_ca_it_is_given(
    trust: str, verified: bool, test_ca: tuple[CertAuthority, Path], tmp_path: Path
) -> None:
    ca, pki = test_ca
    extra = {"--upstream-ca": ["--upstream-ca", str(ca.cert_path)], "system store": []}.get(
        trust, [trust]
    )
    err = tmp_path / "stderr"
    with (
        tls_sdk_server(pki / "origin-cert.pem", pki / "origin-key.pem") as origin,
        err.open("wb") as err_file,
        run_proxy(origin, tmp_path / "cap", *extra, stderr=err_file) as proxy,
    ):
        status = httpx.get(f"{proxy.url}/mcp", timeout=20).status_code
    records = read_records(tmp_path / "cap")
    unreachable = [r for r in records if r["kind"] == "server_unreachable"]
    if verified:
        assert status != 502 and not unreachable  # the origin answered (a GET without session)
    else:
        # The test CA is in no system store: the proxy refuses the origin, and records why.
        assert status == 502
        assert "TLS handshake failed" in unreachable[0]["error"]
    insecure_warning = "--upstream-insecure: origin certificates are not verified"
    assert (insecure_warning in err.read_text()) == (trust == "--upstream-insecure")


@pytest.mark.proxy
@pytest.mark.timeout(180)
def test_an_sdk_client_keeps_its_https_url_through_the_teams_certificate(
    test_ca: tuple[CertAuthority, Path], tmp_path: Path
) -> None:
    """TLS both ways: the official SDK client speaks https to the proxy, which serves `--cert`
    (signed by the team's CA, which the client trusts), and the proxy speaks https to the
    origin, verified against `--upstream-ca`. The capture holds the exchanges, as plain as
    ever, and analyzes clean."""
    ca, pki = test_ca
    out = tmp_path / "cap"
    with (
        tls_sdk_server(pki / "origin-cert.pem", pki / "origin-key.pem") as origin,
        run_proxy(
            origin, out, "--upstream-ca", str(ca.cert_path), "--cert", str(pki / "front.pem")
        ) as proxy,
    ):
        done = sdk_client(
            f"https://127.0.0.1:{proxy.port}/mcp", {"SSL_CERT_FILE": str(ca.cert_path)}
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split(" ", 1)[1].strip() == "balance of acct-1: 600 cents"
    records = read_records(out)
    requests = [r for r in records if r["kind"] == "request"]
    assert len(requests) >= 3 and {r["scheme"] for r in requests} == {"https"}
    assert records[0]["listen"] == f"127.0.0.1:{proxy.port}"  # not mitmproxy's default
    assert records[0]["upstream"] == origin
    code, report = _analyze(out)
    assert code == 0, report["findings"]


@pytest.mark.proxy
@pytest.mark.timeout(180)
def test_a_forward_proxy_captures_an_sdk_client_that_trusts_mitmproxys_ca(
    test_ca: tuple[CertAuthority, Path], tmp_path: Path
) -> None:
    """`--mode regular`: the client is set up with HTTPS_PROXY and the CA the proxy names on
    stderr, and keeps the origin's own URL; each request records the origin it went to."""
    ca, pki = test_ca
    out, ca_dir, err = tmp_path / "cap", tmp_path / "mitmproxy", tmp_path / "stderr"
    with (
        tls_sdk_server(pki / "origin-cert.pem", pki / "origin-key.pem") as origin,
        err.open("wb") as err_file,
        run_proxy(
            None,
            out,
            *("--mode", "regular", "--ca-dir", str(ca_dir), "--upstream-ca", str(ca.cert_path)),
            stderr=err_file,
        ) as proxy,
    ):
        mitm_ca = ca_dir / "mitmproxy-ca-cert.pem"
        assert f"trusting the CA in {mitm_ca})" in err.read_text()
        done = sdk_client(
            f"{origin}/mcp", {"HTTPS_PROXY": proxy.url, "SSL_CERT_FILE": str(mitm_ca)}
        )
    assert done.returncode == 0, done.stderr[-2000:]
    records = read_records(out)
    assert records[0]["mode"] == "regular" and records[0]["upstream"] is None
    requests = [r for r in records if r["kind"] == "request"]
    assert len(requests) >= 3
    assert {r["upstream"] for r in requests} == {origin.removeprefix("https://")}
    code, report = _analyze(out)
    assert code == 0, report["findings"]


# An official-SDK client of two servers at once, calling each in turn.
_TWO_SERVERS = """\
import sys
import anyio
from mcp import Client

async def main() -> None:
    async with Client(sys.argv[1]) as first, Client(sys.argv[2]) as second:
        await first.list_tools()
        await second.list_tools()
        for client in (first, second):
            result = await client.call_tool("get_balance", {"account": "acct-1"})
            print(result.content[0].text)

anyio.run(main)
"""


@pytest.mark.proxy
@pytest.mark.timeout(180)
def test_a_forward_proxys_capture_of_two_servers_is_each_origins_own_sessions(
    tmp_path: Path,
) -> None:
    """`--mode regular` in front of two official-SDK servers, one client talking to both in the
    sessionless 2026 era, where a session is the client's identity (`client:<ip>|<clientInfo>|`):
    the same at both servers. Each server's flows make its own session, named by its origin (on
    one origin they would be one session), and the report names both origins."""
    out, ca_dir = tmp_path / "cap", tmp_path / "mitmproxy"
    with (
        sdk_server() as first,
        sdk_server() as second,
        run_proxy(None, out, "--mode", "regular", "--ca-dir", str(ca_dir)) as proxy,
    ):
        done = sdk_client(
            f"{first}/mcp", {"HTTP_PROXY": proxy.url}, script=_TWO_SERVERS, more=[f"{second}/mcp"]
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["balance", "of", "acct-1:", "600", "cents"] * 2
    requests = [r for r in read_records(out) if r["kind"] == "request"]
    # Absolute-form requests: the authority names the origin (mitmproxy connects after the hook).
    assert {r["authority"] for r in requests} == {
        o.removeprefix("http://") for o in (first, second)
    }
    code, report = _analyze(out)
    assert code == 0, report["findings"]
    assert report["summary"]["sessions"] == 2
    assert report["summary"]["origins"] == {first: 1, second: 1}
    sessions = read_timeline([out], cache=False).sessions.collect()
    keys = set()
    for origin in (first, second):
        (row,) = sessions.filter(pl.col("origin") == origin).iter_rows(named=True)
        assert row["session_id"].startswith("client:127.0.0.1|")
        assert row["session_id"].endswith(f"|@{origin}")
        keys.add(row["session_id"].removesuffix(f"@{origin}"))
        assert row["server"] == f"{origin}/mcp"
        # discovery, tools/list, tools/call: every flow to this origin
        to_origin = [r for r in requests if f"http://{r['authority']}" == origin]
        assert row["flows"] == len(to_origin) >= 3
    assert len(keys) == 1  # the same client key at both servers
    table = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "analyze", "--no-cache", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    named = ", ".join(f"{origin} (1 session)" for origin in sorted((first, second)))
    assert f"2 origins: {named}" in table.stdout


@pytest.mark.proxy
@pytest.mark.timeout(120)
def test_metrics_are_counts_in_prometheus_format_and_a_stats_line_says_them_too(
    tmp_path: Path,
) -> None:
    out, err, metrics_port = tmp_path / "cap", tmp_path / "stderr", free_port()
    secret_header, body_marker = "Bearer very-secret-value", "payload-marker-7f3a"
    with Origin() as origin, err.open("wb") as err_file:
        origin.scripts["/mcp"] = Script(writes=[body_marker.encode()], chunked=False)
        origin.scripts["/sse"] = Script(
            headers=[("Content-Type", "text/event-stream")],
            writes=[b"id: 1\ndata: {}\n\n", b"id: 2\ndata: {}\n\n"],
        )
        with run_proxy(
            origin.url,
            out,
            *("--metrics", f"127.0.0.1:{metrics_port}", "--stats-interval", "1"),
            stderr=err_file,
        ) as proxy:
            with httpx.Client(timeout=10) as client:
                for _ in range(3):
                    headers = {"Authorization": secret_header, "X-Note": body_marker}
                    client.post(f"{proxy.url}/mcp", content=body_marker, headers=headers)
                client.get(f"{proxy.url}/sse")

            def scrape() -> dict[str, float]:
                text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
                assert secret_header not in text and body_marker not in text
                return {
                    sample.name: sample.value
                    for family in text_string_to_metric_families(text)
                    for sample in family.samples
                }

            _wait_for(lambda: scrape().get("seamwatch_written_total", 0) >= 14)
            values = scrape()
            _wait_for(lambda: "exchanges=4 " in err.read_text())
    assert values["seamwatch_exchanges_total"] == 4
    assert values["seamwatch_sse_events_total"] == 2
    assert values["seamwatch_files_total"] == 1
    assert values["seamwatch_dropped_total"] == 0
    assert values["seamwatch_redacted_total"] >= 3  # the Authorization headers
    assert values["seamwatch_bytes_total"] >= 3 * len(body_marker) * 2
    assert 0 <= values["seamwatch_write_lag_seconds"] < 5
    assert {name.removeprefix("seamwatch_") for name in values} >= {
        "exchanges_total", "sse_events_total", "bytes_total", "written_total",
        "dropped_total", "redacted_total", "files_total", "write_lag_seconds",
    }  # fmt: skip
    lines = [line for line in err.read_text().splitlines() if "stats:" in line]
    assert len(lines) >= 2  # every second, and at exit
    assert lines[-1].startswith("seamwatch: stats: exchanges=4 sse_events=2 bytes=")
    assert body_marker not in err.read_text() and secret_header not in err.read_text()


@pytest.mark.proxy
@pytest.mark.timeout(120)
def test_sighup_closes_the_current_file_and_opens_the_next(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    with Origin() as origin:
        origin.scripts["/mcp"] = Script(writes=[b"{}"], chunked=False)
        with run_proxy(origin.url, out) as proxy, httpx.Client(timeout=10) as client:
            client.post(f"{proxy.url}/mcp", content=b"{}")
            proxy.proc.send_signal(signal.SIGHUP)
            _wait_for(lambda: len(list(out.glob("capture-*.jsonl"))) == 1)
            assert proxy.proc.poll() is None  # rotated, not hung up
            client.post(f"{proxy.url}/mcp", content=b"{}")
    files = sorted(out.glob("capture-*.jsonl"))
    assert len(files) == 2
    first, second = ([json.loads(line) for line in f.read_text().splitlines()] for f in files)
    assert [r["kind"] for r in first if r["kind"] in ("request", "stream_end")] == [
        "request",
        "stream_end",
    ]
    assert second[0]["kind"] == "capture_open" and second[0]["file_index"] == 1
    assert sum(r["kind"] == "request" for r in second) == 1
    code, report = _analyze(out)
    assert code == 0 and not report["findings"], report["findings"]


def _folder_size(folder: Path) -> int:
    """The bytes of the capture files in `folder`, from one listing whose every file could be
    read: the writer renames a `.partial` when it closes it, and retention deletes files, so a
    file listed may be gone when its size is asked; the listing is then taken again."""
    for _ in range(100):
        try:
            return sum(p.stat().st_size for p in folder.glob("capture-*"))
        except FileNotFoundError:
            continue
    raise AssertionError(f"{folder} kept changing under 100 listings")


@pytest.mark.proxy
@pytest.mark.timeout(180)
def test_retention_keeps_the_folder_within_max_size_and_the_analysis_names_the_cut(
    tmp_path: Path,
) -> None:
    """A proxy run far past `--max-size`: the oldest closed files go, the open one never;
    what remains analyzes with the cut as an info note, not as lost records."""
    out, max_size = tmp_path / "cap", 96 * 1024
    body = b'{"x":"' + b"y" * 4000 + b'"}'
    with Origin() as origin:
        origin.scripts["/mcp"] = Script(writes=[b"{}"], chunked=False)
        with (
            run_proxy(origin.url, out, "--max-size", "96K") as proxy,
            httpx.Client(timeout=10) as client,
        ):
            for _ in range(100):  # ~400 KB of request bodies: four times the bound
                assert client.post(f"{proxy.url}/mcp", content=body).status_code == 200
                assert _folder_size(out) <= max_size
    files = sorted(out.glob("capture-*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert sum(p.stat().st_size for p in files) <= max_size
    opens = [json.loads(f.read_text().splitlines()[0]) for f in files]
    assert opens[0]["file_index"] > 0  # the first files are gone
    deleted = [d for o in opens for d in o["retention"]["deleted"]]
    assert deleted and {d["reason"] for d in deleted} == {"max_bytes"}
    cut = opens[-1]["retention"]["cut"][opens[-1]["run_id"]]
    assert opens[0]["seq"] == cut + 1  # every record before the first kept file was deleted
    code, report = _analyze(out)
    assert code == 0, report["findings"]
    (health,) = [f for f in report["findings"] if f["detector"] == "capture-health"]
    assert health["severity"] == "info"
    assert f"{cut + 1} record(s) deleted by the proxy's retention" in health["title"]
    assert "gaps in seq" not in health["title"]


@pytest.mark.proxy
@pytest.mark.timeout(150)
def test_upstream_mode_chains_to_another_proxy_and_records_the_origin(tmp_path: Path) -> None:
    """`--mode upstream:URL`: a forward proxy that sends everything through the proxy at URL
    (here another seamwatch proxy, in `--mode regular`); both record the exchange."""
    near, far = tmp_path / "near", tmp_path / "far"
    with Origin() as origin:
        origin.scripts["/mcp"] = Script(writes=[b"{}"], chunked=False)
        with (
            run_proxy(None, far, "--mode", "regular", "--ca-dir", str(tmp_path / "ca")) as chained,
            run_proxy(
                None,
                near,
                *("--mode", f"upstream:{chained.url}", "--ca-dir", str(tmp_path / "ca")),
            ) as proxy,
            httpx.Client(proxy=proxy.url, timeout=20) as client,
        ):
            assert client.post(f"{origin.url}/mcp", content=b"{}").text == "{}"
    assert len(origin.requests) == 1
    near_records, far_records = read_records(near), read_records(far)
    assert near_records[0]["mode"] == f"upstream:{chained.url}"
    assert near_records[0]["upstream"] == chained.url
    for records in (near_records, far_records):
        (request,) = [r for r in records if r["kind"] == "request"]
        assert request["path"] == "/mcp" and request["authority"].startswith("127.0.0.1")
