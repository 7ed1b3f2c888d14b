import socket
import subprocess
import sys
from pathlib import Path

import pytest

from addons.proxy import CAPTURE_ADDON, mitmdump_args
from analyzer.cli import build_parser


def test_mitmdump_args_run_the_capture_addon_in_reverse_mode() -> None:
    args = mitmdump_args(
        upstream="http://127.0.0.1:9000",
        listen_host="127.0.0.1",
        listen_port=8080,
        out=Path("cap"),
        replica_header="X-Served-By",
    )
    assert args[args.index("--mode") + 1] == "reverse:http://127.0.0.1:9000"
    assert args[args.index("-s") + 1] == str(CAPTURE_ADDON) and CAPTURE_ADDON.exists()
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
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
        ["proxy"],
    ],
)
def test_bad_proxy_usage_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2


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
