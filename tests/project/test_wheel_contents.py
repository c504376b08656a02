"""The wheel holds no validation records (issue 43): every data file of trainplan/validation
is left out by pyproject's exclude-package-data, and the loader says where they live instead."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from trainplan.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "trainplan"


def test_validation_records_are_excluded_from_the_wheel():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    excluded = conf["exclude-package-data"]["trainplan"]
    included = conf["package-data"]["trainplan"]
    data = [p.relative_to(PKG).as_posix() for p in (PKG / "validation").iterdir()
            if p.suffix in {".json", ".md"}]
    assert data, "no validation records found"
    assert all(any(fnmatch.fnmatch(d, pat) for pat in excluded) for d in data), data
    assert not any(pat.startswith("validation/") for pat in included), included


def test_missing_records_name_where_they_live():
    from trainplan.validation import records

    with pytest.raises(InputError, match="source tree"):
        records("no_such_records.json")
    assert records("published_runs.json")["runs"]
