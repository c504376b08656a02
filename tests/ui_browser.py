"""A real browser for the ui's tests: the app served by uvicorn on a free loopback port in a
thread, and Debian's chromium driven by Selenium through Debian's chromedriver.

Without chromium or chromedriver the browser tests skip locally and FAIL under ``CI=true``
(.ci/run installs both: ``apt-get install chromium chromium-driver``), so CI never passes them
silently.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def _find(names: tuple[str, ...]) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


def need(what: str) -> None:
    """Skip (locally) or fail (CI=true) for a missing piece of the browser set-up."""
    msg = (f"{what} (Debian: apt-get install -y chromium chromium-driver; .ci/run installs them)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("browser tests must run in CI: " + msg)
    pytest.skip(msg)


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver), or skip/fail."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        need("the selenium package is not installed (the test extra has it)")
    chromium, driver = _find(BROWSERS), _find(DRIVERS)
    if chromium is None:
        need("no chromium binary found")
    if driver is None:
        need("no chromedriver binary found")
    return chromium, driver  # type: ignore[return-value]


def serve() -> Iterator[str]:
    """The app on a free loopback port (port 0) in a thread; yields its URL."""
    from trainplan.ui.server import make_server
    got: list[str] = []
    ready = threading.Event()

    def on_ready(url: str) -> None:
        got.append(url)
        ready.set()
    server = make_server("127.0.0.1", 0, ready=on_ready)
    thread = threading.Thread(target=server.run, daemon=True, name="trainplan-ui-test")
    thread.start()
    if not ready.wait(60):
        pytest.fail("the ui server did not start in 60 s")
    try:
        yield got[0]
    finally:
        server.should_exit = True
        thread.join(30)


def chrome(downloads: Path, profile: Path) -> Any:
    """A headless chromium with the console log kept and downloads going to ``downloads``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    chromium, driver = browser_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-sync",
                f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    opts.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                           "download.prompt_for_download": False})
    d = webdriver.Chrome(service=Service(driver), options=opts)
    d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow",
                                                      "downloadPath": str(downloads)})
    return d


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The browser console's errors since the last call (SEVERE entries)."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
