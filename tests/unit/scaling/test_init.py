"""The scaling package's lazy exports: each public name is the function or class it names, also
after every submodule has been imported (a submodule named like an export would shadow it: the
import system sets the package attribute to the module)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import trainplan.scaling as scaling


def test_no_export_is_shadowed_by_a_submodule():
    for info in pkgutil.iter_modules(scaling.__path__):
        importlib.import_module(f"trainplan.scaling.{info.name}")
    for name in scaling.__all__:
        value = getattr(scaling, name)
        assert not isinstance(value, types.ModuleType), name
    from trainplan.scaling import recommend
    assert inspect.isfunction(recommend)
