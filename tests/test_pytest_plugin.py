"""The pytest plugin, run on throwaway suites (pytester, in a subprocess so the `pytest11` entry
point loads it as a user's install does) against the lab's SDK server through the real proxy."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzer.pytest_plugin import TestSpan, attribute
from tests.support.sarif import assert_valid_sarif
from tests.support.tls import sdk_server

pytest_plugins = ("pytester",)

SUITE_TIMEOUT_S = 150

# A staging suite as a user writes it: the official SDK client pointed at `seamwatch_proxy`.
# The lab server's control plane (`CONTROL`) is reached directly, never through the proxy.
CLEAN_TEST = """
import anyio
from mcp import Client


def test_balance(seamwatch_proxy):
    async def run():
        async with Client(seamwatch_proxy + "/mcp") as client:
            await client.list_tools()
            for _ in range(2):  # a read-only tool called twice: not a finding
                result = await client.call_tool("get_balance", {"account": "acme"})
                assert not result.is_error

    anyio.run(run)
"""

# A client that re-sends `charge_card` (side-effecting) after its stream broke: on 2026-07-28
# closing the stream cancels the call, yet the card was charged once already.
RETRY_TEST = """
import anyio
import httpx
from lab.clients.raw import ModernClient, wait_until

CONTROL = "{control}"
CALL = {{"name": "charge_card", "arguments": {{"card": "4242", "amount_cents": 1999}}}}


def test_charge_retried_after_break(seamwatch_proxy):
    async def run():
        async with httpx.AsyncClient(timeout=30) as http:
            client = ModernClient(http, seamwatch_proxy + "/mcp")
            await client.request(1, "server/discover")
            await client.request(2, "tools/list")
            async with client.post(client.body(3, "tools/call", CALL, progress_token=3)) as stream:
                assert (await stream.next_event()) is not None  # charge 1 submitted; then break

            async def cancelled():
                charges = (await http.get(CONTROL + "/lab/state")).json()["charges"]
                return bool(charges) and charges[0]["outcome"] == "cancelled"

            await wait_until(cancelled, timeout=20)
            (await http.post(CONTROL + "/lab/gates/charge-settle")).raise_for_status()
            async with client.post(client.body(4, "tools/call", CALL, progress_token=4)) as stream:
                await stream.response_message(4)

    anyio.run(run)
"""

# The lab's SDK server with charges waiting on the "charge-settle" gate.
_LAB_SERVER = ("--event-ids", "none", "--charge-gate")

PLAIN_TEST = """
def test_plain():
    assert 1 + 1 == 2
"""


@pytest.fixture
def lab_server() -> Iterator[str]:
    with sdk_server(*_LAB_SERVER) as root:
        yield root


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=SUITE_TIMEOUT_S)


def _summary(result: pytest.RunResult) -> str:
    """The plugin's section of the terminal summary."""
    text = result.stdout.str()
    start = text.find(" seamwatch ")
    return text[start:] if start >= 0 else ""


@pytest.mark.timeout(SUITE_TIMEOUT_S + 30)
def test_clean_suite_passes(pytester: pytest.Pytester, lab_server: str) -> None:
    # The out folder and the formats from the ini file, the upstream from the command line.
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\nseamwatch_out = "staging-out"\nseamwatch_report = "json"\n'
    )
    pytester.makepyfile(test_suite=CLEAN_TEST)
    result = _run(pytester, "--seamwatch-upstream", lab_server)
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stdout.str()
    summary = _summary(result)
    assert "0 at or above medium" in summary and "FAILED" not in summary
    report = json.loads((pytester.path / "staging-out" / "seamwatch.json").read_text())
    assert report["summary"]["tool_calls"] >= 2  # the traffic went through the proxy
    assert not [f for f in report["findings"] if f["severity"] in ("medium", "high")]


@pytest.mark.timeout(2 * SUITE_TIMEOUT_S + 60)
def test_a_call_resent_after_its_stream_broke_fails_naming_the_test(
    pytester: pytest.Pytester, lab_server: str, tmp_path: Path
) -> None:
    pytester.makepyfile(test_a_clean=CLEAN_TEST, test_b_retry=RETRY_TEST.format(control=lab_server))
    result = _run(pytester, "--seamwatch-upstream", lab_server, "--seamwatch-report", "json,sarif")
    result.assert_outcomes(passed=2)  # the tests pass; the traffic they made does not
    assert result.ret == 1
    summary = _summary(result)
    lines = [line for line in summary.splitlines() if "repeated-tool-call" in line]
    assert lines, summary
    assert "[high]" in lines[0]
    assert lines[0].endswith("(during test_b_retry.py::test_charge_retried_after_break)")
    out = pytester.path / "seamwatch-out"
    sarif = json.loads((out / "seamwatch.sarif").read_text())
    assert_valid_sarif(sarif)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "repeated-tool-call"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].startswith("seamwatch-out/capture/capture-")
    assert location["region"]["startLine"] > 1
    report = json.loads((out / "seamwatch.json").read_text())
    repeated = [f for f in report["findings"] if f["detector"] == "repeated-tool-call"]
    assert [f["request_ids"] for f in repeated] == [["3", "4"]]

    # Accepting it in a baseline turns the same run green, and says so.
    baseline = tmp_path / "baseline.json"
    entry = {"fingerprint": repeated[0]["fingerprint"], "detector": "repeated-tool-call"}
    entry |= {"title": repeated[0]["title"], "reason": "known: client retries"}
    baseline.write_text(json.dumps({"schema": 1, "findings": [entry]}))
    # A fresh server: the first one's gate is open now, so its charges no longer wait.
    with sdk_server(*_LAB_SERVER) as control:
        pytester.makepyfile(test_b_retry=RETRY_TEST.format(control=control))
        again = _run(
            pytester, "--seamwatch-upstream", control, "--seamwatch-baseline", str(baseline)
        )
    again.assert_outcomes(passed=2)
    assert again.ret == 0, again.stdout.str()
    assert "1 baselined, 0 fixed" in _summary(again)


def test_without_upstream_the_plugin_does_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert _summary(result) == ""
    assert not (pytester.path / "seamwatch-out").exists()
    # The same output as with the plugin switched off, but for its name and the time taken.
    without = _run(pytester, "-p", "no:seamwatch")
    assert _comparable(result) == _comparable(without)


def _comparable(result: pytest.RunResult) -> list[str]:
    return [
        re.sub(r" in [0-9.]+s", "", line)
        for line in result.stdout.lines
        if not line.startswith(("plugins:", "running:", "     in:"))
    ]


def test_nothing_starts_when_no_test_asks_for_the_proxy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = _run(pytester, "--seamwatch-upstream", "http://127.0.0.1:9")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert _summary(result) == ""
    assert not list(pytester.path.glob("seamwatch-out/capture*"))


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_proxy_that_cannot_start_stops_the_session_with_one_line(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    # The upstream comes from the ini file; the proxy refuses a URL with a path (exit 2).
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\nseamwatch_upstream = "http://127.0.0.1:9/mcp"\n'
    )
    pytester.makepyfile(test_suite=CLEAN_TEST + PLAIN_TEST.replace("test_plain", "test_later"))
    started = time.monotonic()
    result = _run(pytester, *workers)
    assert time.monotonic() - started < 60
    assert result.ret == pytest.ExitCode.INTERRUPTED
    outcomes = result.parseoutcomes()
    assert outcomes["errors"] == 1
    if not workers:
        assert "passed" not in outcomes  # the session stopped after the failed setup
    reason = "seamwatch: the proxy did not start: "
    (stop,) = [line for line in result.stdout.lines if f"Interrupted: {reason}" in line]
    assert "drop '/mcp'" in stop
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_fixture_without_an_upstream_says_what_to_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=CLEAN_TEST)
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*seamwatch_proxy needs an upstream: pass --seamwatch-upstream*"])


@pytest.mark.parametrize(
    "option",
    ["--seamwatch-fail-on=severe", "--seamwatch-report=pdf", "--seamwatch-baseline=absent.json"],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, option: str) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = _run(pytester, "--seamwatch-upstream", "http://127.0.0.1:9", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert option.split("=")[0] in result.stderr.str()


@pytest.mark.timeout(SUITE_TIMEOUT_S + 30)
def test_xdist_one_proxy_per_worker_captures_merged(
    pytester: pytest.Pytester, lab_server: str
) -> None:
    pytester.makepyfile(test_a_clean=CLEAN_TEST, test_b_retry=RETRY_TEST.format(control=lab_server))
    result = _run(pytester, "-n", "2", "--seamwatch-upstream", lab_server)
    result.assert_outcomes(passed=2)
    assert result.ret == 1
    captures = sorted(p.name for p in (pytester.path / "seamwatch-out").glob("capture*"))
    assert captures == ["capture-gw0", "capture-gw1"]
    lines = [line for line in _summary(result).splitlines() if "repeated-tool-call" in line]
    assert lines and lines[0].endswith("(during test_b_retry.py::test_charge_retried_after_break)")


_SPANS = (TestSpan("t::a", 100, 200), TestSpan("t::b", 300, 400))


@pytest.mark.parametrize(
    ("first_ns", "want"),
    [
        (150, "t::a"),  # during a
        (300, "t::b"),  # at b's start
        (250, "t::a"),  # between tests: the last one that started
        (50, None),  # before any test
        (None, None),  # no time
    ],
)
def test_attribute(first_ns: int | None, want: str | None) -> None:
    assert attribute(first_ns, _SPANS) == want


def test_the_last_sessions_output_is_replaced_but_a_foreign_folder_kept(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    out = pytester.path / "seamwatch-out"
    (out / "capture").mkdir(parents=True)
    (out / "capture" / "capture-old-0000.jsonl").write_text("{}\n")
    (out / "tests-main.json").write_text("{}")
    (out / "seamwatch.sarif").write_text("{}")
    (out / "keep.txt").write_text("not ours")
    assert _run(pytester, "--seamwatch-upstream", "http://127.0.0.1:9").ret == 0
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]

    (out / "capture").mkdir()
    (out / "capture" / "notes.txt").write_text("someone else's")
    result = _run(pytester, "--seamwatch-upstream", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "holds 'notes.txt', not a seamwatch capture" in result.stderr.str()
    assert (out / "capture" / "notes.txt").exists()
