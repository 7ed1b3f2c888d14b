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
        ["proxy"],
    ],
)
def test_bad_proxy_usage_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2
