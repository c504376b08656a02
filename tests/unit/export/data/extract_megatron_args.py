"""Regenerate megatron_core_v0.16.1_args.json (not a test; run by hand when the pin moves).

Megatron-LM's training argument parser lives in megatron/training/arguments.py of the
Megatron-LM repository, which no PyPI wheel ships (megatron-core holds megatron/core only).
Usage, with a checkout of the pinned tag on PYTHONPATH:

    git -C Megatron-LM archive core_v0.16.1 megatron | tar -x -C /tmp/mlm
    PYTHONPATH=/tmp/mlm python extract_megatron_args.py > megatron_core_v0.16.1_args.json

megatron/core/transformer/custom_layers/batch_invariant_kernels.py imports triton (GPU kernels
the parser never calls); on a CPU-only machine it is replaced by an empty module first.
"""

from __future__ import annotations

import argparse
import json
import sys
import types


def _inert(name: str) -> None:
    mod = types.ModuleType(name)
    mod.__getattr__ = lambda attr: (lambda *a, **k: (a[0] if a and callable(a[0]) else None))
    sys.modules[name] = mod


def main() -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        _inert("megatron.core.transformer.custom_layers.batch_invariant_kernels")
    from megatron.training.arguments import add_megatron_arguments

    parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    flags = {}
    for action in parser._actions:
        for opt in action.option_strings:
            if not opt.startswith("--"):
                continue
            ent: dict = {"takes": "flag" if action.nargs == 0 else "value"}
            if action.choices is not None:
                ent["choices"] = [getattr(c, "name", c) if not isinstance(c, str) else c
                                  for c in action.choices]
            if action.nargs not in (None, 0):
                ent["nargs"] = action.nargs
            if action.type is not None and ent["takes"] == "value":
                ent["type"] = getattr(action.type, "__name__", str(action.type))
            flags[opt] = ent
    json.dump({"flags": flags}, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
