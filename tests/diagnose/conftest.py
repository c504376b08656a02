from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "diagnose"
SHARED = REPO / ".." / "shared" / "artifacts"


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/artifacts is not beside the repository")
    return SHARED
