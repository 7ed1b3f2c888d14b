import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from mitmproxy.net import server_spec

from addons.proxy import CAPTURE_ADDON, mitmdump_args
from analyzer.cli import build_parser
from tests.support.disk import small_disk
from tests.support.origin import Origin, Script
from tests.support.proxy import ROOT, free_port, read_records, wait_port


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
