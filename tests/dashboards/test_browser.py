"""The dashboard in headless Chromium: `seamwatch dashboard` on a free loopback port.

On the stored lab capture, the findings and the timeline chart render; on the planted capture
(tests/support/planted.py), wire text that would run script (`<img onerror>`, `<script>`) or
fetch a URL (a markdown image) stays characters on every page, in the chart's tooltips too, and
`window.pwned` stays undefined. The browser only ever talks to 127.0.0.1. Each server is
stopped by its pid; every wait is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser
from tests.support.planted import HTML, MARKDOWN_IMAGE_URL

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not browser.CHROMIUM.is_file(),
        reason="no /usr/bin/chromium: install Debian's chromium and chromium-driver "
        "(.ci/run does) to run the dashboard's browser test",
    ),
    pytest.mark.timeout(300),
]

PAGES = ("", "findings", "timeline", "live")
WAIT_S = 60.0


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with browser.chromium(performance_log=True) as d:
        yield d


@pytest.fixture(scope="module")
def lab_url(lab_capture: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("lab-server") / "dashboard.log"
    with browser.dashboard(lab_capture, log=log) as url:
        yield url


@pytest.fixture(scope="module")
def planted_url(planted: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("planted-server") / "dashboard.log"
    with browser.dashboard(planted, log=log) as url:
        yield url


def open_page(driver: Any, url: str, *, expect: str) -> None:
    """Load a page and wait until `expect` is on it and the app has stopped running."""
    driver.get(url)
    browser.wait_for(
        lambda: expect in browser.page_text(driver), timeout=WAIT_S, what=f"{expect!r} at {url}"
    )
    browser.wait_idle(driver, timeout=WAIT_S)


def pwned(driver: Any) -> str:
    return str(driver.execute_script("return typeof window.pwned"))


def planted_images(driver: Any) -> list[str]:
    """Images a rendered payload would have added: `<img src=x>` or the markdown image."""
    return list(
        driver.execute_script(
            "return Array.from(document.images).map(i => i.getAttribute('src'))"
            ".filter(s => s === 'x' || (s || '').includes(arguments[0]))",
            MARKDOWN_IMAGE_URL,
        )
    )


def chart_marks(driver: Any) -> list[Any]:
    """The point marks of the timeline chart (Vega's SVG renderer draws them as paths)."""
    from selenium.webdriver.common.by import By

    return list(
        driver.find_elements(
            By.CSS_SELECTOR, "[data-testid='stVegaLiteChart'] g.mark-symbol.role-mark path"
        )
    )


def test_findings_and_timeline_render(
    driver: Any, lab_url: str, lab_capture: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    from analyzer.analysis import read_timeline
    from analyzer.detectors import run_detectors

    found = run_detectors(read_timeline([lab_capture]))
    assert found.height

    open_page(driver, lab_url, expect="Capture health")
    values = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMetric']")]
    assert "Records read\n48" in values
    assert f"Findings\n{found.height}" in values
    driver.save_screenshot(str(tmp_path / "overview.png"))

    first = found.row(0, named=True)
    open_page(driver, lab_url + "findings", expect=first["title"])
    text = browser.page_text(driver)
    assert f"{found.height} of {found.height} findings" in text
    headings = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "h3")]
    assert first["detector"] in headings
    assert first["detail"].split(".")[0] in text
    driver.save_screenshot(str(tmp_path / "findings.png"))

    open_page(driver, lab_url + "timeline", expect="Payload of")
    chart = driver.find_element(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")
    browser.wait_for(lambda: len(chart_marks(driver)) > 20, timeout=WAIT_S, what="chart marks")
    assert chart.size["height"] > 200
    svg_text = chart.find_element(By.TAG_NAME, "svg").text
    assert "S1 POST tools/call id 4 · replica-a → replica-b" in svg_text
    assert "S2 POST tools/call id 5 · replica-a" in svg_text
    screenshot = tmp_path / "timeline.png"
    driver.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000


def test_planted_payload_stays_text_on_every_page(
    driver: Any, planted_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    expectations = {
        "": "Capture health",
        "findings": HTML,  # a finding's title quotes the tool name, as text
        "timeline": "Payload of",
        "live": "Latest exchanges",
    }
    for slug in PAGES:
        open_page(driver, planted_url + slug, expect=expectations[slug])
        assert pwned(driver) == "undefined", slug
        assert planted_images(driver) == [], slug
        driver.save_screenshot(str(tmp_path / f"planted-{slug or 'overview'}.png"))

    # The chart's tooltips carry payload previews: hover every mark.
    open_page(driver, planted_url + "timeline", expect="Payload of")
    marks = browser.wait_for(lambda: chart_marks(driver), timeout=WAIT_S, what="chart marks")
    tooltips = []
    for mark in marks:
        ActionChains(driver).move_to_element(mark).perform()
        tip = driver.find_elements(By.ID, "vg-tooltip-element")
        if tip and tip[0].is_displayed():
            tooltips.append(tip[0].text)
    # JSON text: the quotes inside the planted attribute are escaped there.
    assert any("<img src=x onerror=" in tip for tip in tooltips), tooltips
    assert pwned(driver) == "undefined"
    assert planted_images(driver) == []
    # The payload pane shows the planted text verbatim in a code block.
    code = " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, "pre code"))
    assert "window.pwned" in code


def test_the_browser_only_talks_to_loopback(driver: Any, lab_url: str, planted_url: str) -> None:
    driver.get_log("performance")  # drop what came before
    for base in (lab_url, planted_url):
        open_page(driver, base + "timeline", expect="Payload of")
        open_page(driver, base + "findings", expect="findings")
    urls = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.add(message["params"]["request"]["url"])
    assert urls, "no requests seen"
    outside = sorted(
        u for u in urls if not u.startswith(("http://127.0.0.1:", "ws://127.0.0.1:", "data:"))
    )
    assert outside == []
