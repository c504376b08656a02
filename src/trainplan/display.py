"""Where a result's notebook display comes from: renderers registered by kind.

The result models (:class:`trainplan.spec.result.Result`: an Estimate, a PlanResult) sit below
the console renderers in the layers (``pyproject.toml``, ``[tool.importlinter]``), so they do not
import them: :mod:`trainplan.report.notebook` registers its HTML renderers here, and the package
root imports it. A leaf: no pydantic, no rich, nothing of trainplan.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

_HTML: dict[str, Callable[[Any], str]] = {}


def register_html(kind: str, render: Callable[[Any], str]) -> None:
    """Render results of ``kind`` ("estimate", "plan", "audit", "recommendation", "fit") to HTML
    with ``render``."""
    _HTML[kind] = render


def html_renderer(kind: str) -> Callable[[Any], str] | None:
    """The HTML renderer registered for ``kind``, or None."""
    return _HTML.get(kind)


class HtmlDisplay:
    """Mixin of a result that a notebook shows as the console's tables: ``_repr_html_`` calls
    the renderer registered for the class's ``display_kind``."""

    #: the kind its HTML renderer is registered under
    display_kind: ClassVar[str] = ""

    def _repr_html_(self) -> str | None:
        """The console's tables as HTML for Jupyter (None: no renderer registered, and the
        notebook shows the repr)."""
        render = html_renderer(self.display_kind)
        return render(self) if render is not None else None
