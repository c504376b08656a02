"""The public API's contract (trainplan.contract): bad arguments are InputError naming the
argument, and only the arguments are judged (an error inside the function is not converted)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import trainplan
from trainplan.contract import Numbers, public
from trainplan.errors import InputError


@public
def _f(a: float, b: int = 1, *, c: str | None = None, d: Path | None = None,
       e: list[int] | None = None, n: Numbers = 0.0) -> tuple:
    return a, b, c, d, e, n


def test_good_arguments_pass_through():
    assert _f(1, 2, c="x", e=[1, 2], n=np.array([1.0, 2.0]))[:3] == (1, 2, "x")
    assert _f(np.float64(2.5), np.int64(3))[:2] == (2.5, 3)
    assert _f(1.0, b=8.0)[1] == 8 and type(_f(1.0, b=8.0)[1]) is int   # a whole float is a count
    assert _f(1.0, d="some/file")[3] == Path("some/file")               # a str path is a Path


@pytest.mark.parametrize("kw,field,valid", [
    (dict(a="x"), "a", "a number"),
    (dict(a=float("nan")), "a", "not NaN"),
    (dict(a=10**400), "a", "a number"),                 # no float holds it
    (dict(a=True), "a", "True/False is no count"),
    (dict(a=1, b=2.5), "b", "an integer"),
    (dict(a=1, c=5), "c", "a string or None"),
    (dict(a=1, d="a\x00b"), "d", "path"),
    (dict(a=1, e=[1, "x"]), "e", "a list of an integer"),
    (dict(a=1, n="x"), "n", "array"),
    (dict(a=1, n=[1, None]), "n", "array"),
])
def test_bad_arguments_name_the_argument(kw, field, valid):
    with pytest.raises(InputError) as e:
        _f(**kw)
    assert e.value.field == field and valid in str(e.value)


def test_binding_errors_name_the_function():
    with pytest.raises(InputError, match=r"_f\(\) arguments .*missing a required argument"):
        _f()
    with pytest.raises(InputError, match="unexpected keyword argument 'zz'"):
        _f(1, zz=2)


def test_errors_inside_the_function_are_not_converted():
    @public
    def broken(x: int) -> int:
        return {}[x]                    # a bug, not bad input: it stays a KeyError
    with pytest.raises(KeyError):
        broken(1)


def _exported_functions():
    pkgs = ["trainplan"] + [f"trainplan.{m.name}" for m in pkgutil.iter_modules(trainplan.__path__)
                            if m.ispkg]
    for pkg in pkgs:
        mod = importlib.import_module(pkg)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isfunction(obj):
                yield f"{pkg}.{name}", obj


def test_every_exported_function_is_checked():
    found = dict(_exported_functions())
    assert len(found) > 100 and "trainplan.evolve" in found and "trainplan.scaling.fit_law" in found
    unchecked = [n for n, f in found.items() if not getattr(f, "__trainplan_public__", False)]
    assert unchecked == []


def test_evolve_answers_with_input_error():
    job = trainplan.Job(seq_len=2048, global_batch=64)
    with pytest.raises(InputError) as e:
        trainplan.evolve(job, seq_len="long")
    assert e.value.field == "Job.seq_len" and e.value.value == "long"
    with pytest.raises(InputError, match="did you mean seq_len"):
        trainplan.evolve(job, seqlen=4096)
    with pytest.raises(InputError, match="a trainplan spec"):
        trainplan.evolve({"seq_len": 1}, seq_len=2)
    assert trainplan.evolve(job, seq_len=4096).seq_len == 4096
