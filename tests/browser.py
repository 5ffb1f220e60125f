"""A real headless browser for the page tests: Debian's Chromium, driven by Debian's
chromedriver through Selenium. Both paths are given, so Selenium's own driver manager never
runs and nothing is downloaded (``scripts/test.sh`` installs the two packages where they are
missing). A test module takes the fixture by importing ``chromium``; it is named ``browser``.

Selenium's calls block: a test whose worker shares the event loop runs them in a thread
(``asyncio.to_thread``).

``PLANGATE_SCREENSHOTS=docs`` (a directory, relative to the repository) makes ``screenshot``
write the page as a PNG there: the pictures in the docs are taken by the tests that check what
they show."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREENSHOTS_VAR = "PLANGATE_SCREENSHOTS"
WIDTH = 1200


@pytest.fixture(name="browser")
def chromium() -> Iterator[WebDriver]:
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        why = ("Debian's chromium and chromium-driver are not installed (scripts/test.sh "
               "installs them: apt-get install -y chromium chromium-driver)")
        if os.environ.get("CI"):
            pytest.fail(why)  # the test command should have installed them
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="plangate-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--window-size={WIDTH},900",
                "--hide-scrollbars", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def in_time_zone(d: WebDriver, zone: str) -> None:
    """The current tab reads times as a person in ``zone`` would (an IANA name)."""
    d.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})


def screenshot(d: WebDriver, name: str) -> Path | None:
    """The whole page as ``name`` in the directory ``PLANGATE_SCREENSHOTS`` names; None (and
    nothing written) without it."""
    where = os.environ.get(SCREENSHOTS_VAR)
    if not where:
        return None
    folder = Path(where)
    if not folder.is_absolute():
        folder = Path(__file__).resolve().parents[1] / folder
    folder.mkdir(parents=True, exist_ok=True)
    height = int(d.execute_script("return document.documentElement.scrollHeight"))
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": WIDTH, "height": min(max(height, 300), 4000), "deviceScaleFactor": 1,
        "mobile": False})
    try:
        path = folder / name
        assert d.save_screenshot(str(path)), path
        return path
    finally:
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
