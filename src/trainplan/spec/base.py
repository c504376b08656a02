"""Shared pydantic configuration for specs: frozen, strict about unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Base of every spec: immutable, rejects unknown keys and non-finite numbers (inf, nan),
    validates defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True,
                              allow_inf_nan=False, protected_namespaces=())
