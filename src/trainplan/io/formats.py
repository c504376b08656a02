"""Generated files through each format's own writer, so no input can inject structure.

TOML through ``tomli_w`` (hukkin/tomli-w, the writer paired with the standard library's
``tomllib`` reader), YAML through ``yaml.safe_dump``, shell words through ``shlex.quote``, JSON
through :mod:`trainplan.io.jsonout`. Free text in a comment line goes through :func:`comment`,
which keeps it on that line (control characters, newlines included, become spaces).
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")


def one_line(text: Any) -> str:
    """``text`` with every control character (newlines, tabs, NUL...) replaced by a space."""
    return _CONTROL.sub(" ", str(text))


def comment(text: Any, prefix: str = "# ") -> str:
    """One comment line for TOML, YAML or shell: ``# text`` with the text kept on the line."""
    return prefix + one_line(text)


def toml_dumps(tables: dict[str, Any]) -> str:
    """TOML text of ``tables`` written by ``tomli_w`` (strings escaped by the writer)."""
    import tomli_w

    return tomli_w.dumps(tables)


def toml_string(value: Any) -> str:
    """One TOML basic string (for an inline value), escaped by ``tomli_w``."""
    import tomli_w

    return tomli_w.dumps({"v": str(value)}).split("=", 1)[1].strip()
