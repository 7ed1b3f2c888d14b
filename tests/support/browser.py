"""The dashboard in a real browser: `seamwatch dashboard` on a free loopback port, headless
Chromium through Debian's chromedriver (never Selenium Manager, which would try to download).

Used by `tests/dashboards/test_browser.py` and `scripts/dashboard-screenshots`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.support.proxy import stop

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
SEAMWATCH = Path(sys.executable).parent / "seamwatch"


def browser_available() -> bool:
    """Whether Debian's chromium and chromium-driver are installed."""
    return CHROMIUM.is_file() and CHROMEDRIVER.is_file()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dashboard(path: Path, *, log: Path, timeout: float = 60.0) -> Iterator[str]:
    """Run `seamwatch dashboard PATH --port N` until the block ends; yield its base URL."""
    port = free_port()
    command = [str(SEAMWATCH), "dashboard", str(path), "--port", str(port)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for(lambda: _healthy(url), timeout=timeout, what=f"dashboard at {url}", proc=proc)
        yield url
    finally:
        stop(proc)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "_stcore/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def wait_for[T](
    check: Callable[[], T],
    *,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    interval: float = 0.2,
) -> T:
    """Poll `check` until it returns something truthy; TimeoutError (naming `what`) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(interval)


@contextlib.contextmanager
def chromium(
    *, width: int = 1440, height: int = 1000, performance_log: bool = False
) -> Iterator[Any]:
    """A headless Chromium driven through /usr/bin/chromedriver, with a fresh profile.

    With `performance_log`, `driver.get_log("performance")` returns the DevTools network events
    (every URL the page requested).
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = Path(tempfile.mkdtemp(prefix="seamwatch-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-quic",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    if performance_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # An explicit driver path: Selenium Manager is never asked to find (or download) one.
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def page_text(driver: Any) -> str:
    """The visible text of the page's main area."""
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def wait_idle(driver: Any, *, timeout: float = 60.0) -> None:
    """Wait until the app has rendered and no script run is in progress."""
    from selenium.webdriver.common.by import By

    def idle() -> bool:
        app = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stApp']")
        if not app:
            return False
        running = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stStatusWidget']")
        skeleton = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSkeleton']")
        return not running and not skeleton

    wait_for(idle, timeout=timeout, what="the app to finish running")
