"""Where a result's notebook display comes from: renderers registered by kind.

The result models (:class:`trainplan.spec.result.Result`: an Estimate, a PlanResult) sit below
the console renderers in the layers (``pyproject.toml``, ``[tool.importlinter]``), so they do not
import them: :mod:`trainplan.report.notebook` registers its HTML renderers here, and the package
root imports it. A leaf: no pydantic, no rich, nothing of trainplan.
"""

from __future__ import annotations

from typing import Any, Callable

_HTML: dict[str, Callable[[Any], str]] = {}


def register_html(kind: str, render: Callable[[Any], str]) -> None:
    """Render results of ``kind`` ("estimate", "plan") to HTML with ``render``."""
    _HTML[kind] = render


def html_renderer(kind: str) -> Callable[[Any], str] | None:
    """The HTML renderer registered for ``kind``, or None."""
    return _HTML.get(kind)
