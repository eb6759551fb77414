"""The run report in a real browser: headless Chromium (Debian's chromium + chromium-driver) loads the page,
every plot image decodes (naturalWidth > 0), the console stays free of errors, and a full-page screenshot
is saved beside the test's output (tmp_path/report.png). A control page shows the two checks can fail."""

import base64
import shutil
import struct
from pathlib import Path

import pytest

from codefu.observability.report import SECTIONS, write_report  # noqa: E402
from helpers.report_runs import make_run  # noqa: E402

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian's chromium and chromium-driver (scripts/setup.sh)",
)


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1100,900",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def load(browser, page: Path) -> tuple[list[dict], list[dict]]:
    """(images as {alt, complete, width}, console errors) of a page."""
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(page.resolve().as_uri())
    imgs = browser.execute_script(
        "return Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth}))"
    )
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    return imgs, errors


def test_report_renders_in_chromium(browser, tmp_path):
    run = make_run(tmp_path / "run", steps=24, total=24, val_every=6)
    page = write_report(run)
    imgs, errors = load(browser, page)
    assert [i["alt"] for i in imgs] == [s.title for s in SECTIONS]
    assert all(i["complete"] and i["width"] > 0 for i in imgs), imgs
    assert errors == []
    assert browser.title == "codefu run run"

    height = browser.execute_script("return document.documentElement.scrollHeight")
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = browser.execute_cdp_cmd(
        "Page.captureScreenshot",
        {  # the whole page, not one screen of it
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    path = tmp_path / "report.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    w, h = struct.unpack(">II", path.read_bytes()[16:24])
    assert w >= 1000 and h >= height


def test_the_checks_catch_a_broken_image_and_a_console_error(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img alt="x" src="data:image/png;base64,iVBORw0KGgo=">'
        '<script>console.error("boom")</script></body></html>'
    )
    imgs, errors = load(browser, bad)
    assert imgs[0]["width"] == 0
    assert any("boom" in e["message"] for e in errors)
