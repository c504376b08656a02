"""Base of the result models (an Estimate, a PlanResult): read-only, hashable, short to print,
and shown as the console's tables in a notebook.

* The dicts and lists a result holds are made read-only when it is built or validated
  (:func:`trainplan.spec.base.freeze`), as catalog records are: ``est.strategy["tp"] = 2`` raises
  TypeError, and a result is hashable, consistently with ``==``. ``model_dump()``, the JSON,
  copies and pickles are those of plain dicts and lists.
* ``repr()`` is one line (:meth:`Result.summary`); the fields stay in ``model_dump()``.
* ``_repr_html_`` (Jupyter) renders the tables ``trainplan estimate`` / ``plan`` print, with the
  renderer :mod:`trainplan.report.notebook` registers (:mod:`trainplan.display`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from trainplan.display import HtmlDisplay
from trainplan.spec.base import freeze

#: Longest name a one-line summary shows in full (longer ones end in "...").
NAME_CHARS = 60


def cut(text: str, n: int = NAME_CHARS) -> str:
    """``text`` on one line, at most ``n`` characters."""
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[:n - 3] + "..."


class Result(HtmlDisplay, BaseModel):
    """A result: frozen, with read-only containers, a one-line repr and a notebook display
    (:class:`trainplan.display.HtmlDisplay`)."""

    model_config = ConfigDict(frozen=True, protected_namespaces=())

    @model_validator(mode="after")
    def _read_only(self) -> Any:
        return freeze(self)

    def summary(self) -> str:
        """The result in one line (what ``repr`` shows inside the class name)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary()})"

    __str__ = __repr__
