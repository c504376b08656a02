"""Published training runs with their sources: the validation set of benchmarks/ and the tests.

The records (``*.json``, with ``SOURCES*.md``) are data of the source tree: nothing at run time
reads them, so the wheel leaves them out (pyproject ``exclude-package-data``); :func:`records`
says so where they are missing.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from trainplan.errors import InputError


def records(name: str) -> dict[str, Any]:
    """The validation file ``name`` (e.g. ``published_runs.json``) of the source tree."""
    path = resources.files("trainplan.validation").joinpath(name)
    if not path.is_file():
        raise InputError("validation records", name, "a file of the source tree: the records "
                         "ship with a git checkout (`pip install -e .`), not the wheel")
    return json.loads(path.read_text(encoding="utf-8"))
