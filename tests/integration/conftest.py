"""The integration tier's shared fixtures: what several modules use and is costly to start."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = Path(
    os.environ.get("SLOB_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)


@pytest.fixture(scope="session")
def browser() -> Iterator[webdriver.Chrome]:
    """Headless chromium as root: no sandbox, no background traffic to a closed network. One
    for the session (six modules draw pages in it; each start cost ~1 s): every page is
    loaded by open_page, which drops the log an earlier page left."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "apt install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
