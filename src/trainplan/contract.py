"""The public API's contract on bad input: only trainplan's own errors.

Every function exported by ``trainplan`` and by its public packages (``__all__``) is wrapped by
:func:`public`, which checks the call at the edge, before the function runs:

* the arguments bind to the signature (a missing, unknown or doubled argument is an
  :class:`~trainplan.errors.InputError` naming the function's arguments, not a ``TypeError``);
* each argument has the type its annotation states (``float``, ``int``, ``str``, ``bool``,
  ``None``, unions, ``Literal``, containers of those, paths, classes): a wrong type is an
  InputError naming the argument, the value and what is valid;
* a ``float`` argument is not NaN (NaN compares false with every bound the physics checks, so it
  would otherwise pass through to a result or to an ``int()`` deep inside).

Only what the arguments are is checked here, and only before the call: an exception raised by
the function's own code is never converted (a bug stays a bug, with its traceback). Values that
are of the right type but out of range are the function's own concern (its InputError).

A ``float`` or ``int`` argument takes a Python or numpy number (numpy scalars are what the
physics returns); an ``int`` one also a whole float (8.0 is passed on as 8, as a spec field
reads it). A function that broadcasts over numpy arrays says so with :data:`Numbers`
(a number, a numpy array of numbers, or a list of numbers) instead of the scalar type.
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import inspect
import math
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

from trainplan.errors import InputError, shown

F = TypeVar("F", bound=Callable[..., Any])


class _NumbersMarker:
    def __repr__(self) -> str:
        return "Numbers"


_NUMBERS = _NumbersMarker()
#: The annotation of an argument that broadcasts: a number, a numpy array of numbers or a list
#: of numbers (``Any`` to type checkers).
Numbers = typing.Annotated[Any, _NUMBERS]

#: Items of a list, tuple or mapping argument checked one by one (a longer container is checked
#: on its first items only: the check stays cheap on a million lengths).
MAX_ITEMS_CHECKED = 10_000
_SKIP = object()                # an annotation this checker does not know: not checked
_FLOAT_MAX = sys.float_info.max


def public(fn: F) -> F:
    """Check ``fn``'s arguments at the call (see the module's docstring); the result is ``fn``
    with the same name, signature and docstring (``__wrapped__`` is the unchecked function)."""
    sig = inspect.signature(fn)
    hints: dict[str, Any] | None = None

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        nonlocal hints
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InputError(f"{fn.__name__}() arguments", _call_shown(args, kwargs),
                             f"{e} (signature: {fn.__name__}{sig})") from None
        if hints is None:
            hints = _hints(fn, sig)
        for name, value in bound.arguments.items():
            hint = hints.get(name, _SKIP)
            if hint is _SKIP:
                continue
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                for i, v in enumerate(value):
                    _check(f"{name}[{i}]", v, hint)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                for k, v in value.items():
                    _check(k, v, hint)
            else:
                new = _check(name, value, hint)
                if new is not value:                # a str given for a Path: the Path
                    bound.arguments[name] = new
        return fn(*bound.args, **bound.kwargs)

    checked.__signature__ = sig                     # type: ignore[attr-defined]
    checked.__trainplan_public__ = True             # type: ignore[attr-defined]
    return typing.cast(F, checked)


def wrap_exports(namespace: dict[str, Any]) -> None:
    """Wrap with :func:`public` every function a package exports (its ``__all__``), in place:
    called at the end of a package's ``__init__`` so that a new export is covered too."""
    for name in namespace.get("__all__", ()):
        value = namespace.get(name)
        if value is not None:
            namespace[name] = checked_export(value)


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) for ``exports`` ({name: submodule}):
    each name is imported from its submodule on first use, wrapped by :func:`checked_export`
    and kept in ``namespace`` (the package's globals), so the package imports light."""
    import importlib

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = checked_export(getattr(importlib.import_module(f"{package}.{module}"), name))
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def checked_export(value: Any) -> Any:
    """``value`` wrapped with :func:`public` if it is a plain function (classes, constants and
    functions already wrapped are returned as they are): for packages that export lazily."""
    if inspect.isfunction(value) and not getattr(value, "__trainplan_public__", False):
        return public(value)
    return value


class _Call:
    """The arguments of a call, shown as they were written: ``(1, tokens='x')``."""

    def __init__(self, args: tuple, kwargs: dict):
        parts = [shown(a, 40) for a in args] + [f"{k}={shown(v, 40)}" for k, v in kwargs.items()]
        self.text = "(" + ", ".join(parts) + ")"

    def __repr__(self) -> str:
        return self.text


def _call_shown(args: tuple, kwargs: dict) -> _Call:
    return _Call(args, kwargs)


def _hints(fn: Callable[..., Any], sig: inspect.Signature) -> dict[str, Any]:
    """The parameters' annotations resolved in ``fn``'s module; one that does not resolve (a
    name imported for type checkers only) is left unchecked."""
    target = inspect.unwrap(fn)
    glb = dict(getattr(sys.modules.get(target.__module__), "__dict__", {}))
    out: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            continue
        if isinstance(ann, str):
            try:
                ann = eval(ann, glb, {})                # noqa: S307 - the module's own annotation
            except Exception:  # noqa: BLE001 - an unresolvable annotation is not checked
                continue
        out[name] = ann
    return out


def _check(name: str, value: Any, hint: Any) -> Any:
    """``value`` (a str made a Path where a Path is expected) or an InputError."""
    ok, fixed = _conforms(value, hint)
    if ok:
        if isinstance(value, float) and math.isnan(value) and _wants_float(hint):
            raise InputError(name, value, f"{describe(hint)} (not NaN)")
        return fixed
    if _is_bool(value) and (_wants(hint, float) or _wants(hint, int)):
        raise InputError(name, value, f"a number, not {value!r} ({describe(hint)}; True/False "
                                      "is no count or amount)")
    raise InputError(name, value, describe(hint))


def _wants(hint: Any, kind: type) -> bool:
    """Whether ``hint`` is ``kind`` or a union holding it."""
    if hint is kind:
        return True
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and kind in typing.get_args(hint)


def _wants_float(hint: Any) -> bool:
    return _wants(hint, float) or (typing.get_origin(hint) is typing.Annotated
                                   and _NUMBERS in typing.get_args(hint)[1:])


def _is_bool(value: Any) -> bool:
    np = _np()
    return isinstance(value, bool) or (np is not None and isinstance(value, np.bool_))


def _np() -> Any:
    return sys.modules.get("numpy")


def _is_number(value: Any, integral: bool) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):          # a real number must fit a float (10**400 does not)
        return integral or abs(value) <= _FLOAT_MAX
    np = _np()
    if np is not None:
        if isinstance(value, np.bool_):
            return False
        if isinstance(value, np.ndarray) and value.ndim == 0:     # a 0-d array is a number
            return value.dtype.kind in ("iu" if integral else "iuf")
        if isinstance(value, (np.integer, np.floating) if not integral else np.integer):
            return True
    return not integral and isinstance(value, float)


def _conforms(value: Any, hint: Any) -> tuple[bool, Any]:
    """(does ``value`` conform to ``hint``, the value to pass on)."""
    if hint is Any or hint is object or isinstance(hint, TypeVar) or hint is _SKIP:
        return True, value
    if hint is None or hint is type(None):
        return value is None, value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        if _NUMBERS in typing.get_args(hint)[1:]:
            return _numbers(value), value
        return _conforms(value, args[0])
    if origin in (typing.Union, types.UnionType):
        for a in args:
            ok, fixed = _conforms(value, a)
            if ok:
                return True, fixed
        return False, value
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args), value
    if hint is float:
        return _is_number(value, integral=False), value
    if hint is int:
        if _is_whole_float(value):              # 8.0 is 8, as a spec field reads it
            return True, int(value)
        return _is_number(value, integral=True), value
    if hint is bool:
        np = _np()
        return isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)), value
    if hint is str:
        return isinstance(value, str), value
    if hint in (Path, os.PathLike) or origin is os.PathLike:
        if isinstance(value, str) and hint is Path:
            return "\x00" not in value, Path(value)
        return (isinstance(value, os.PathLike) and "\x00" not in os.fspath(value)), value
    if origin is not None:
        return _container(value, origin, args), value
    if isinstance(hint, type):
        if hint is cabc.Callable:
            return callable(value), value
        try:
            return isinstance(value, hint), value
        except TypeError:                   # a protocol that is not runtime-checkable
            return True, value
    return True, value                      # a form this checker does not know: not checked


def _is_whole_float(value: Any) -> bool:
    np = _np()
    if np is not None and isinstance(value, np.floating):
        value = float(value)
    return type(value) is float and math.isfinite(value) and value.is_integer()


def _numbers(value: Any) -> bool:
    """A number, a numpy array of numbers, or a list/tuple of numbers (:data:`Numbers`)."""
    if _is_number(value, integral=False):
        return True
    np = _np()
    if np is not None and isinstance(value, np.ndarray):
        return value.dtype.kind in "iuf"
    if isinstance(value, (list, tuple)):
        return all(_is_number(v, integral=False) for v in value[:MAX_ITEMS_CHECKED])
    return False


def _container(value: Any, origin: Any, args: tuple) -> bool:
    if origin is cabc.Callable:
        return callable(value)
    if origin is type:
        return isinstance(value, type)
    if not isinstance(origin, type):
        return True
    if origin in (cabc.Iterable, cabc.Collection) and isinstance(value, (str, bytes)) \
            and args and args[0] not in (str, Any):
        return False                        # a string is no iterable of paths or numbers
    try:
        if not isinstance(value, origin):
            np = _np()      # a numpy array of numbers where a sequence of numbers is expected
            return (np is not None and isinstance(value, np.ndarray) and value.ndim == 1
                    and origin in (cabc.Sequence, cabc.Iterable, cabc.Collection)
                    and (not args or args[0] is Any
                         or (args[0] in (int, float) and value.dtype.kind in
                             ("iu" if args[0] is int else "iuf"))))
    except TypeError:
        return True
    if origin in (cabc.Iterable, cabc.Iterator, cabc.Generator):
        return True                         # not consumed to be checked
    if isinstance(value, (str, bytes)) and origin is cabc.Sequence and args and args[0] is not str:
        return False
    if isinstance(value, cabc.Mapping):
        if len(args) != 2:
            return True
        for i, (k, v) in enumerate(value.items()):
            if i >= MAX_ITEMS_CHECKED:
                break
            if not (_conforms(k, args[0])[0] and _conforms(v, args[1])[0]):
                return False
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        if not args:
            return True
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return len(value) == len(args) and all(_conforms(v, a)[0] for v, a in zip(value, args))
        item = args[0]
        return all(_conforms(v, item)[0] for v in list(value)[:MAX_ITEMS_CHECKED])
    return True


def describe(hint: Any) -> str:
    """What ``hint`` asks for, in words: 'a number', 'an integer or None', 'one of 'a', 'b''."""
    if hint is None or hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        if _NUMBERS in typing.get_args(hint)[1:]:
            return "a number or an array (or list) of numbers"
        return describe(args[0])
    if origin in (typing.Union, types.UnionType):
        parts = [describe(a) for a in args]
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    words = {float: "a number", int: "an integer", bool: "True or False", str: "a string",
             Path: "a path (str or pathlib.Path)", os.PathLike: "a path"}
    if hint in words:
        return words[hint]
    if origin is os.PathLike:
        return "a path"
    if origin in (list, tuple, cabc.Sequence):
        homogeneous = origin is not tuple or (len(args) == 2 and args[1] is Ellipsis)
        return f"a list of {describe(args[0])}" if args and homogeneous else "a list or tuple"
    if origin in (dict, cabc.Mapping):
        return "a mapping (dict)"
    if origin in (cabc.Iterable, cabc.Collection):
        return f"an iterable of {describe(args[0])}" if args else "an iterable"
    if origin is cabc.Callable or hint is cabc.Callable:
        return "a function"
    if isinstance(hint, type):
        return f"a {hint.__name__}"
    return str(hint)
