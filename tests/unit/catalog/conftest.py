"""Every catalog test starts from the packaged catalog (no $TRAINPLAN_CATALOG, no cache)."""

from __future__ import annotations

import pytest

import trainplan.catalog.accelerators as cat


@pytest.fixture(autouse=True)
def _fresh_catalog(monkeypatch):
    monkeypatch.delenv(cat.ENV_VAR, raising=False)
    cat.clear_cache()
    yield
    cat.clear_cache()
