"""Run a launch set's torchtitan configuration through torchtitan's own ConfigManager.

Not a test module: ``test_framework_parsers.py`` runs it in a subprocess with one torchtitan
release on ``sys.path`` (two releases cannot share one environment):

    python framework_check.py torchtitan 0.3.0 WORLD_SIZE -- ARGS...     (the launch's arguments)
    python framework_check.py torchtitan 0.2.2 WORLD_SIZE -- --job.config_file FILE

It prints one JSON object: the parsed parallelism, training, model and optimizer settings, after
torchtitan's ParallelDims has validated the degrees against the world size.

torchtitan's config modules import, through the package, code the parser never runs on a CPU
machine: Triton GPU kernels (triton ships with CUDA builds of torch only), and the trainer's
data and logging stack (datasets, TensorBoard, W&B). Those modules alone are replaced by inert
ones (:class:`Inert`); ConfigManager, the config dataclasses, tyro and ParallelDims are the
release's own code.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import json
import sys
import types

INERT = {
    "0.3.0": ("torchtitan.distributed.minimal_async_ep.kernels", "torch.utils.tensorboard",
              "datasets", "wandb", "tensorboard"),
    "0.2.2": ("torchtitan.models.moe.kernels", "torch.utils.tensorboard", "datasets", "wandb",
              "tensorboard"),
}


class _Any:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Any()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()

    def __getitem__(self, key):
        return _Any()

    def __mro_entries__(self, bases):
        return (object,)


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()


class Inert(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the named modules (and their submodules) with empty modules."""

    def __init__(self, names):
        self.names = tuple(names)

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == n or fullname.startswith(n + ".") for n in self.names):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Module(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def _plain(obj):
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    return obj if isinstance(obj, (int, float, str, bool, type(None))) else repr(obj)


def check_torchtitan(version: str, world: int, args: list[str]) -> dict:
    sys.meta_path.insert(0, Inert(INERT[version]))
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    cfg = ConfigManager().parse_args(args)
    p = cfg.parallelism
    if version == "0.3.0":
        dims = ParallelDims.from_config(p, world)
        ac = type(cfg.activation_checkpoint).__qualname__
        model = {"name": cfg.model_spec.name, "flavor": cfg.model_spec.flavor}
        lr = cfg.optimizer.param_groups[0].optimizer_kwargs["lr"]
    else:
        dims = ParallelDims(dp_shard=p.data_parallel_shard_degree,
                            dp_replicate=p.data_parallel_replicate_degree,
                            cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                            pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                            etp=p.expert_tensor_parallel_degree, world_size=world)
        ac = cfg.activation_checkpoint.mode
        import importlib
        mod = importlib.import_module(f"torchtitan.models.{cfg.model.name}")
        flavors = next(v for k, v in vars(mod).items() if k.endswith("_args") and isinstance(v, dict))
        if cfg.model.flavor not in flavors:
            raise SystemExit(f"flavor {cfg.model.flavor!r} not in {sorted(flavors)}")
        model = {"name": cfg.model.name, "flavor": cfg.model.flavor}
        lr = cfg.optimizer.lr
    return {"parallelism": _plain(p), "training": _plain(cfg.training), "model": model,
            "lr": lr, "lr_scheduler": _plain(cfg.lr_scheduler), "ac": str(ac),
            "checkpoint": {"enable": cfg.checkpoint.enable, "interval": cfg.checkpoint.interval},
            "world": dims.world_size}


def main(argv: list[str]) -> None:
    framework, version, world, sep, *args = argv
    assert framework == "torchtitan" and sep == "--"
    print(json.dumps(check_torchtitan(version, int(world), args)))


if __name__ == "__main__":
    main(sys.argv[1:])
