"""Shared pydantic configuration for specs: frozen, strict about unknown keys."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

S = TypeVar("S", bound=BaseModel)


class Spec(BaseModel):
    """Base of every spec: immutable, rejects unknown keys and non-finite numbers (inf, nan),
    validates defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True,
                              allow_inf_nan=False, protected_namespaces=())


def evolve(spec: S, **changes: Any) -> S:
    """A new ``spec`` of the same type with ``changes``, validated again like any other
    (``model_copy(update=...)`` would skip validation). The spec itself never changes."""
    fields = {k: getattr(spec, k) for k in type(spec).model_fields if k in spec.model_fields_set
              or k in changes}
    fields.update(changes)
    return type(spec)(**fields)
