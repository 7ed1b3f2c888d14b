"""Screenshots of every dashboard page, for docs/dashboard.md.

    .venv/bin/python scripts/dashboard_screenshots.py CAPTURE [OUT_DIR]

Runs `seamwatch dashboard CAPTURE` on a free loopback port and drives headless Chromium with the
browser test's setup (tests/support/browser.py: Debian's chromium and chromedriver). Each page
is captured at its full height. The docs use the lab's round-robin-replicas capture
(`seamwatch lab run round-robin-replicas --out DIR`, then `DIR/capture`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analyzer.analysis import read_timeline  # noqa: E402
from analyzer.detectors import run_detectors  # noqa: E402
from tests.support import browser  # noqa: E402

WIDTH = 1400
MAX_HEIGHT = 3600


def shoot(driver: object, url: str, expect: str, out: Path, *, settle: float = 1.5) -> None:
    """Load `url`, wait for `expect`, and save a full-height screenshot to `out`."""
    driver.set_window_size(WIDTH, 1000)  # type: ignore[attr-defined]
    driver.get(url)  # type: ignore[attr-defined]
    browser.wait_for(
        lambda: expect in browser.page_text(driver), timeout=90, what=f"{expect!r} at {url}"
    )
    browser.wait_idle(driver)
    time.sleep(settle)  # charts finish their first layout
    height = driver.execute_script(  # type: ignore[attr-defined]
        "const m = document.querySelector('[data-testid=stMain]');"
        "return Math.max(m ? m.scrollHeight : 0, document.body.scrollHeight);"
    )
    driver.set_window_size(WIDTH, min(int(height) + 40, MAX_HEIGHT))  # type: ignore[attr-defined]
    time.sleep(settle)
    driver.save_screenshot(str(out))  # type: ignore[attr-defined]
    _shrink(out)
    print(out)


def _shrink(path: Path) -> None:
    """Re-save a screenshot with a 256-colour palette: a third of the bytes, same look."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    capture = Path(argv[0])  # as given: the page shows it, so keep machine paths out of docs
    out_dir = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "screenshots"
    out_dir.mkdir(parents=True, exist_ok=True)
    found = run_detectors(read_timeline([capture]))
    by_detector = {row["detector"]: row["fingerprint"] for row in found.iter_rows(named=True)}
    with (
        browser.dashboard(capture, log=out_dir / ".dashboard.log") as url,
        browser.chromium(width=WIDTH) as driver,
    ):
        shoot(driver, url, "Capture health", out_dir / "overview.png")
        shoot(driver, url + "findings", "findings", out_dir / "findings.png")
        for detector in ("duplicate-event-id", "repeated-tool-call"):
            if detector in by_detector:
                shoot(
                    driver,
                    f"{url}findings?finding={by_detector[detector]}",
                    "What happened",
                    out_dir / f"findings-{detector}.png",
                )
        shoot(driver, url + "timeline", "Payload of", out_dir / "timeline.png")
        shoot(driver, url + "live", "Latest exchanges", out_dir / "live.png")
    (out_dir / ".dashboard.log").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
