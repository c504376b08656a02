"""Errors that reach the user.

Every problem with the user's input is raised as :class:`InputError` (or converted to one at the
edge from a pydantic ``ValidationError``). The CLI prints the message and exits with status 2;
it never shows a traceback for bad input.
"""

from __future__ import annotations

from typing import Any


class TrainplanError(Exception):
    """Base class of trainplan's own errors."""


class InputError(TrainplanError, ValueError):
    """Bad input: names the field, the value given and what would be valid."""

    def __init__(self, field: str, value: Any, valid: str, hint: str | None = None):
        self.field = field
        self.value = value
        self.valid = valid
        self.hint = hint
        msg = f"{field} = {shown(value)} is not valid: {valid}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


def shown(value: Any, limit: int = 160) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters: a whole catalog record
    (an Accelerator with its sources) is named by its type and id instead."""
    r = repr(value)
    if len(r) <= limit:
        return r
    ident = getattr(value, "id", None)
    if isinstance(ident, str):
        return f"{type(value).__name__}(id={ident!r}, ...)"
    return r[:limit - 3] + "..."


class ParsedInputError(TrainplanError):
    """An :class:`InputError` found while the command line is parsed (an empty path). It is no
    ValueError, so typer's parser (which wraps a ValueError in its own usage message) hands it to
    the error boundary as it is: the message of the InputError, exit status 2."""

    def __init__(self, error: InputError):
        self.error = error
        self.field, self.value, self.valid = error.field, error.value, error.valid
        super().__init__(str(error))


class MissingExtraError(TrainplanError, ImportError):
    """An optional dependency is needed: names the extra that provides it."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package: install it with "
            f"pip install 'trainplan[{extra}]'"
        )


def from_validation_error(exc: Any, prefix: str = "", model: Any = None) -> InputError:
    """Turn a pydantic ValidationError into an InputError naming the first bad field; ``model``:
    the class validated, whose keys answer an unknown key when it is no spec (SearchSpace)."""
    errors = exc.errors()
    lines = []
    first_field, first_value, first_msg = "?", None, ""
    for i, err in enumerate(errors):
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "input")
        value = err.get("input")
        msg = err.get("msg", "")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if err.get("type") == "extra_forbidden":
            msg = _unknown_key(exc, tuple(err.get("loc", ("?",))), model)
        if i == 0:
            first_field, first_value, first_msg = field, value, msg
        lines.append(f"{field} = {shown(value)}: {msg}" if not isinstance(value, dict) else f"{field}: {msg}")
    e = InputError(first_field, first_value if not isinstance(first_value, dict) else "…", first_msg)
    if len(lines) > 1:
        e.args = ("; ".join(lines),)
    elif isinstance(first_value, dict):
        e.args = (lines[0],)
    return e


#: Spec classes by name (filled by ``trainplan.spec.base.Spec`` subclasses as they are defined),
#: so that a key a spec lacks is answered with the keys it has.
SPEC_CLASSES: dict[str, Any] = {}


def _unknown_key(exc: Any, loc: tuple[Any, ...], model: Any = None) -> str:
    """'not a key of Stack; did you mean ...? (keys: ...)' for a key a spec does not have: the
    class is the ValidationError's (found by its title), followed along ``loc`` into nested
    specs (``stacks.0.headz`` names a key of Stack, not of Model)."""
    import difflib
    title = getattr(exc, "title", "")
    cls = SPEC_CLASSES.get(title) or (model if getattr(model, "__name__", None) == title else None)
    for part in loc[:-1]:
        if cls is None:
            break
        if isinstance(part, str):             # list/tuple indices keep the item's class
            info = getattr(cls, "model_fields", {}).get(part)
            cls = _spec_in(info.annotation) if info is not None else None
    if cls is None or not hasattr(cls, "model_fields"):
        return "not a key here"
    key = str(loc[-1]) if loc else "?"
    keys = sorted(cls.model_fields)
    close = difflib.get_close_matches(key, keys, n=2, cutoff=0.6)
    return (f"not a key of {cls.__name__}" + (f"; did you mean {' or '.join(close)}?" if close
                                               else "") + f" (keys: {', '.join(keys)})")


def _spec_in(annotation: Any) -> Any:
    """The pydantic model class inside a field's annotation (``Stack`` in
    ``tuple[Stack, ...]``, ``MoE`` in ``Optional[MoE]``), or None."""
    import typing
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in typing.get_args(annotation):
        found = _spec_in(arg)
        if found is not None:
            return found
    return None


def expect_mapping(field: str, value: Any) -> dict:
    """``value`` as a dict (None -> {}); anything else than a mapping is an InputError."""
    from collections.abc import Mapping
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(field, value, "a mapping of keys to values (a dict / a table)")
    return dict(value)


def require_positive(name: str, value: Any) -> float:
    """``value`` as a finite float > 0, or an InputError naming ``name``."""
    import math
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(name, value, "a number > 0") from None
    if not math.isfinite(v) or v <= 0:
        raise InputError(name, value, "a finite number > 0")
    return v


class ChecksFailed(TrainplanError):
    """A check ran and found problems (contradictions, a layout that does not fit): the CLI
    prints the message and exits with status 1 (bad input is status 2)."""
