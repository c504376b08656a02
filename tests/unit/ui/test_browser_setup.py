"""The browser tests' set-up: a missing chromium or chromedriver skips them locally and fails
them under CI=true, never a silent pass in CI."""

from __future__ import annotations

import pytest

import ui_browser


def test_missing_browser_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="browser tests must run in CI"):
        ui_browser.need("no chromium binary found")


def test_missing_browser_skips_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromedriver"):
        ui_browser.need("no chromedriver binary found")


def test_missing_driver_is_noticed(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(ui_browser, "DRIVERS", ("no-such-chromedriver-binary",))
    with pytest.raises(pytest.fail.Exception, match="no chromedriver"):
        ui_browser.browser_paths()
