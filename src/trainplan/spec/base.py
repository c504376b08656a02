"""Shared pydantic configuration for specs: frozen, strict about unknown keys, bounded numbers."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

#: Largest integer a spec field takes: 2^31 keeps the products of two such counts (sequence
#: length x batch, GPUs x micro-batch...) within the int64 the layout search computes in.
MAX_SPEC_INT = 2**31
#: Magnitude range of a non-zero real spec field: [1e-30, 1e30] keeps products and quotients of
#: a few such numbers (rates, bandwidths, tokens) finite and non-zero in float64.
MAX_SPEC_FLOAT = 1e30
MIN_SPEC_FLOAT = 1e-30


def _out_of_range(v: Any, own_upper: bool = False) -> bool:
    """Outside the generic bounds; a field with its own upper bound (``own_upper``) keeps that
    one, but tiny non-zero reals (below 1e-30 in size) are refused everywhere."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return not own_upper and abs(v) > MAX_SPEC_INT
    if isinstance(v, float):
        return v != 0 and (abs(v) < MIN_SPEC_FLOAT or (not own_upper and abs(v) > MAX_SPEC_FLOAT))
    if isinstance(v, (tuple, list)):
        return any(_out_of_range(x, own_upper) for x in v)
    return False


def _own_upper_bound(info: Any) -> bool:
    """Whether a field declares its own upper bound (``Field(le=...)`` / ``lt``)."""
    return any(getattr(m, "le", None) is not None or getattr(m, "lt", None) is not None
               for m in info.metadata)


_FIELD_BOUNDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _field_bounds(cls: type[BaseModel]) -> tuple[tuple[str, bool], ...]:
    """(field name, has its own upper bound) of a spec class, worked out once per class."""
    bounds = _FIELD_BOUNDS.get(cls)
    if bounds is None:
        bounds = _FIELD_BOUNDS[cls] = tuple((name, _own_upper_bound(info))
                                            for name, info in cls.model_fields.items())
    return bounds


S = TypeVar("S", bound=BaseModel)


class Spec(BaseModel):
    """Base of every spec: immutable, rejects unknown keys and non-finite numbers (inf, nan),
    validates defaults, and bounds every number (:data:`MAX_SPEC_INT`, :data:`MAX_SPEC_FLOAT`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True,
                              allow_inf_nan=False, protected_namespaces=())

    @model_validator(mode="after")
    def _bounded(self) -> "Spec":
        for name, own_upper in _field_bounds(type(self)):
            v = getattr(self, name)
            if _out_of_range(v, own_upper):
                raise ValueError(f"{name} = {v!r} is out of range: integers up to "
                                 f"{MAX_SPEC_INT:,}, real numbers 0 or between "
                                 f"{MIN_SPEC_FLOAT:g} and {MAX_SPEC_FLOAT:g} in size")
        return self


def evolve(spec: S, **changes: Any) -> S:
    """A new ``spec`` of the same type with ``changes``, validated again like any other
    (``model_copy(update=...)`` would skip validation). The spec itself never changes."""
    fields = {k: getattr(spec, k) for k in type(spec).model_fields if k in spec.model_fields_set
              or k in changes}
    fields.update(changes)
    return type(spec)(**fields)
