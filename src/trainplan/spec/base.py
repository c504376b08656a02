"""Shared pydantic configuration for specs: frozen, strict about unknown keys, bounded numbers."""

from __future__ import annotations

from collections.abc import Mapping
import typing
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

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


_TAKES_BOOL: dict[tuple[type, str], bool] = {}


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type admits True/False (bool, Any, Literal[True], a union with bool)."""
    if annotation is bool or annotation is Any:
        return True
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Literal:
        return any(isinstance(a, bool) for a in args)
    return any(_takes_bool(a) for a in args)


def _field_takes_bool(cls: type[BaseModel], name: str) -> bool:
    takes = _TAKES_BOOL.get((cls, name))
    if takes is None:
        takes = _TAKES_BOOL[cls, name] = _takes_bool(cls.model_fields[name].annotation)
    return takes


def _is_bool(v: Any) -> bool:
    """True/False, numpy's included, alone or inside a list or tuple (a pair of counts)."""
    if isinstance(v, (list, tuple)):
        return any(_is_bool(x) for x in v)
    return isinstance(v, bool) or (type(v).__module__ == "numpy"
                                   and type(v).__name__ in ("bool", "bool_"))


S = TypeVar("S", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)


class Spec(BaseModel):
    """Base of every spec: immutable, rejects unknown keys and non-finite numbers (inf, nan),
    validates defaults, and bounds every number (:data:`MAX_SPEC_INT`, :data:`MAX_SPEC_FLOAT`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True,
                              allow_inf_nan=False, protected_namespaces=())

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        from trainplan.errors import SPEC_CLASSES
        SPEC_CLASSES.setdefault(cls.__name__, cls)      # an unknown key is answered with its keys

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_number(cls, data: Any) -> Any:
        """pydantic reads True as 1 for a number field: Job(seq_len=True) was a 1-token
        sequence, estimate(gpus=np.bool_(True)) one GPU. A bool is refused where the field
        does not take one (an error at the field, as pydantic's own)."""
        if isinstance(data, dict):
            for name, v in data.items():
                if _is_bool(v) and name in cls.model_fields and not _field_takes_bool(cls, name):
                    raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                        type=PydanticCustomError("bool_number", f"a number, not {v!r} (True/"
                                                 "False is no count or amount)"),
                        loc=(name,), input=v)])
        return data

    @model_validator(mode="after")
    def _bounded(self) -> "Spec":
        for name, own_upper in _field_bounds(type(self)):
            v = getattr(self, name)
            if _out_of_range(v, own_upper):
                raise ValueError(f"{name} = {v!r} is out of range: integers up to "
                                 f"{MAX_SPEC_INT:,}, real numbers 0 or between "
                                 f"{MIN_SPEC_FLOAT:g} and {MAX_SPEC_FLOAT:g} in size")
        return self

    def model_copy(self: S, *, update: Mapping[str, Any] | None = None,  # type: ignore[override]
                   deep: bool = False) -> S:
        """A copy; with ``update``, validated again like any new spec (:func:`evolve`).
        pydantic's own ``model_copy(update=...)`` skips validation, so a copy could otherwise
        carry a negative sequence length or a NaN token count into an estimate."""
        if update:
            return evolve(self, **update)
        return super().model_copy(deep=deep)


def evolve(spec: S, **changes: Any) -> S:
    """A new ``spec`` of the same type with ``changes``, validated again like any other
    (``model_copy(update=...)`` would skip validation). The spec itself never changes.

    Bad input is an :class:`~trainplan.errors.InputError` (never pydantic's ValidationError):
    ``spec`` must be a trainplan spec or catalog record; a change's field is named as
    ``<Class>.<field>`` (``Job.seq_len``), with the value and what is valid."""
    from trainplan.errors import InputError, from_validation_error
    if not isinstance(spec, BaseModel):
        raise InputError("evolve(spec)", spec, "a trainplan spec or record to change (Model, "
                         "Stack, Job, Cluster, Strategy, an Accelerator...)")
    cls = type(spec)
    fields = {k: getattr(spec, k) for k in cls.model_fields if k in spec.model_fields_set
              or k in changes}
    fields.update(changes)
    try:
        return cls(**fields)
    except ValidationError as e:
        raise from_validation_error(e, prefix=f"{cls.__name__}.", model=cls) from None


class FrozenDict(dict):
    """A dict that refuses changes: the mappings inside shared catalog records (a GPU's peaks, a
    framework's factors), so that editing what :func:`trainplan.get_accelerator` returned cannot
    change every later estimate of the process, and those inside results (an Estimate's
    strategy and inputs: :class:`trainplan.spec.result.Result`). Serialises, copies and pickles
    as a dict; hashable (by its items, themselves frozen) so that the record holding it is."""

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this mapping belongs to a shared catalog record or a result and is "
                        "read-only: make a changed record with trainplan.evolve(record, "
                        "field={...}); for another result, estimate or plan again")

    __setitem__ = __delitem__ = __ior__ = _read_only            # type: ignore[assignment]
    update = pop = popitem = clear = setdefault = _read_only    # type: ignore[assignment]

    def __hash__(self) -> int:                # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> Any:
        return (FrozenDict, (dict(self),))

    def __deepcopy__(self, memo: dict[int, Any]) -> "FrozenDict":
        from copy import deepcopy
        return FrozenDict({k: deepcopy(v, memo) for k, v in self.items()})


class FrozenList(list):
    """A list that refuses changes (see :class:`FrozenDict`)."""

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this list belongs to a shared catalog record or a result and is "
                        "read-only: make a changed record with trainplan.evolve(record, "
                        "field=[...]); for another result, estimate or plan again")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only   # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only  # type: ignore[assignment]

    def __hash__(self) -> int:                # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> Any:
        return (FrozenList, (list(self),))

    def __deepcopy__(self, memo: dict[int, Any]) -> "FrozenList":
        from copy import deepcopy
        return FrozenList(deepcopy(v, memo) for v in self)


#: Values that hold nothing to freeze (skipped at once: every result is frozen when built).
_PLAIN = frozenset({str, int, float, bool, type(None), FrozenDict, FrozenList})


def _frozen(v: Any) -> Any:
    if type(v) in _PLAIN:          # a FrozenDict or FrozenList is made by this function: frozen
        return v                    # all through
    if isinstance(v, BaseModel):
        return freeze(v)
    if isinstance(v, dict):
        return FrozenDict({k: _frozen(x) for k, x in v.items()})
    if isinstance(v, list):
        return FrozenList(_frozen(x) for x in v)
    return v


def freeze(model: M) -> M:
    """``model`` with every dict and list inside it (nested models included) made read-only in
    place, for records a cache shares across calls (the catalogs). Frozen pydantic models refuse
    attribute assignment but not edits of the containers they hold. Returns ``model``."""
    for name, v in list(model.__dict__.items()):      # the fields' values
        fv = _frozen(v)
        if fv is not v:
            object.__setattr__(model, name, fv)
    return model
