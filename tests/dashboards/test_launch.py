"""dashboards.launch: the secure `streamlit run` command line and how the path reaches the app."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

from analyzer.cli import main
from dashboards import launch as L


def flags(argv: list[str]) -> dict[str, list[str]]:
    """--name value pairs of a command line, by name (repeatable)."""
    out: dict[str, list[str]] = {}
    for name, value in itertools.pairwise(argv):
        if name.startswith("--"):
            out.setdefault(name[2:], []).append(value)
    return out


def test_command_runs_the_app_with_secure_flags() -> None:
    argv = L.command(port=8765, address="127.0.0.1")
    assert argv[:6] == [sys.executable, "-P", "-m", "dashboards.serve", "run", str(L.APP)]
    got = flags(argv)
    assert got == {
        "server.address": ["127.0.0.1"],
        "server.port": ["8765"],
        "server.headless": ["true"],
        "server.enableXsrfProtection": ["true"],
        "server.enableCORS": ["true"],
        "server.fileWatcherType": ["none"],
        "server.runOnSave": ["false"],
        "server.enableStaticServing": ["false"],
        "browser.gatherUsageStats": ["false"],
        "client.showErrorDetails": ["none"],
        "client.showErrorLinks": ["false"],
        "client.toolbarMode": ["viewer"],
        "server.allowedHosts": ["localhost", "127.0.0.1", "::1"],
    }


def test_streamlit_knows_every_flag() -> None:
    """Each option exists in this Streamlit and accepts the value given (no silent typo)."""
    from streamlit import config

    options = config.get_config_options()
    argv = L.command(port=8765, address="127.0.0.1")
    for name, values in flags(argv).items():
        assert name in options, name
        assert not options[name].deprecated, name
        if options[name].type is bool:
            assert values[0] in ("true", "false"), name
    assert '"none"' in (options["client.showErrorDetails"].description or "")


def test_other_address_has_no_host_allow_list() -> None:
    got = flags(L.command(port=1, address="0.0.0.0"))
    assert got["server.address"] == ["0.0.0.0"]
    assert "server.allowedHosts" not in got


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("dashboard.example", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert L.is_loopback(address) is loopback


def test_environment_carries_the_paths_as_given(tmp_path: Path) -> None:
    # As given, not resolved: the server runs in our cwd and shows the paths to the user.
    env = L.environment(["demo-out/x/capture", "b [1].har"], {"KEEP": "1", L.SOURCE_ENV: "old"})
    assert env == {"KEEP": "1", L.SOURCE_ENV: '["demo-out/x/capture", "b [1].har"]'}
    assert L.decode_source(env[L.SOURCE_ENV]) == ("demo-out/x/capture", "b [1].har")
    assert L.SOURCE_ENV not in L.environment([], {L.SOURCE_ENV: "old"})


class Exec:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], dict[str, str]]] = []

    def __call__(self, path: str, argv: list[str], env: dict[str, str]) -> Any:
        self.calls.append((path, argv, env))
        return 0


@pytest.fixture
def execve(monkeypatch: pytest.MonkeyPatch) -> Exec:
    fake = Exec()
    monkeypatch.setattr(L.os, "execve", fake)
    monkeypatch.setattr(L.os, "name", "posix")
    return fake


def test_cli_execs_streamlit_on_loopback_quietly(
    execve: Exec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["dashboard", str(tmp_path), "--port", "9999"])
    ((path, argv, env),) = execve.calls
    assert path == sys.executable
    assert flags(argv)["server.address"] == ["127.0.0.1"]
    assert flags(argv)["server.port"] == ["9999"]
    assert L.decode_source(env[L.SOURCE_ENV]) == (str(tmp_path),)
    assert "warning" not in capsys.readouterr().err


def test_cli_takes_several_paths(execve: Exec, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b.har").write_text("{}")
    main(["dashboard", str(tmp_path / "a"), str(tmp_path / "b.har")])
    ((_, _, env),) = execve.calls
    assert L.decode_source(env[L.SOURCE_ENV]) == (str(tmp_path / "a"), str(tmp_path / "b.har"))


def test_cli_warns_on_another_address(
    execve: Exec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["dashboard", str(tmp_path), "--address", "0.0.0.0"])
    assert execve.calls
    err = capsys.readouterr().err
    assert "warning: the dashboard listens on 0.0.0.0, not loopback" in err


def test_cli_hands_the_analysis_options_to_the_app(execve: Exec, tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text("")
    main(["dashboard", str(tmp_path), "--replica-header", "X-Served-By", "--only", "causal-gap"])
    main(["dashboard", str(tmp_path), "--client-header", "X-C", "--config", str(config)])
    main(["dashboard", str(tmp_path), "--disable", "causal-gap", "--no-cache"])
    got = [L.decode_options(env[L.OPTIONS_ENV]) for _, _, env in execve.calls]
    assert got == [
        {"only": "causal-gap", "replica_header": "X-Served-By"},
        {"client_header": "X-C", "config": str(config)},
        {"disable": "causal-gap", "no_cache": "true"},
    ]
    main(["dashboard", str(tmp_path)])
    assert L.OPTIONS_ENV not in execve.calls[-1][2]


@pytest.mark.parametrize(
    "option", [["--only", "no-such-detector"], ["--disable", "nope"], ["--config", "absent.toml"]]
)
def test_bad_analysis_options_are_exit_2_before_the_server(
    execve: Exec, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    assert main(["dashboard", str(tmp_path), *option]) == 2
    assert not execve.calls
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_without_path(execve: Exec) -> None:
    main(["dashboard"])
    ((_, _, env),) = execve.calls
    assert L.SOURCE_ENV not in env


def test_missing_path_is_exit_2(
    execve: Exec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dashboard", str(tmp_path / "nope")]) == 2
    assert not execve.calls
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["dashboard", str(tmp_path), str(tmp_path / "nope2")]) == 2  # any of several
    assert not execve.calls
    assert "nope2: no such file or directory" in capsys.readouterr().err


def test_bad_port_is_exit_2(execve: Exec, tmp_path: Path) -> None:
    assert main(["dashboard", str(tmp_path), "--port", "0"]) == 2
    assert not execve.calls
