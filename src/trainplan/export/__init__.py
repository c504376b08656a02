"""Launch files for a chosen layout: DeepSpeed, Megatron-LM, torchtitan, torchrun, SLURM, k8s.

Every key and flag comes from the projects' own sources (see ``docs/plan.md`` and
``shared/reference/formats.md``); tests load the DeepSpeed JSON with DeepSpeed's parser, check
the Megatron flags against the flags Megatron-LM defines, run ``bash -n`` on the scripts and
parse the manifests.

:func:`render` returns ``{file name: text}`` for one format; :func:`emit_files` writes the
files of several formats atomically. When ``megatron`` or ``torchtitan`` is among the formats,
the ``torchrun``, ``slurm`` and ``k8s`` launchers start that program; otherwise they start
``LaunchSpec.script`` (``train.py``).
"""

from __future__ import annotations

from pathlib import Path

from trainplan.costmodel.validate import complete_strategy
from trainplan.errors import InputError
from trainplan.export.spec import LaunchSpec, check_ep_for, check_layout_for, shell_join
from trainplan.spec.base import evolve

__all__ = ["DEFAULT_OUT", "FORMATS", "LaunchSpec", "check_spec", "emit_files", "render", "shell_join",
           "with_program"]

#: Where launch files go without --out: a folder of their own, since a set is switched whole
#: (:func:`trainplan.io.files.write_set`) and the current folder cannot be replaced.
DEFAULT_OUT = Path("launch")

FORMATS: tuple[str, ...] = ("deepspeed", "megatron", "torchtitan", "accelerate", "torchrun",
                             "slurm", "k8s")


def check_spec(spec: LaunchSpec) -> None:
    """The layout must pass the planner's own checks (``costmodel.validate.complete_strategy``):
    world size = tp x pp x cp x dp, batch divisible by micro-batch x dp, and the rest."""
    complete_strategy(spec.model, spec.job, spec.cluster, spec.strategy)


def render(fmt: str, spec: LaunchSpec) -> dict[str, str]:
    """The files of one format as ``{file name: text}``."""
    check_spec(spec)
    check_layout_for(spec, fmt)         # the layout rules of the framework that runs it
    if fmt in ("deepspeed", "megatron", "torchtitan"):     # format id = framework profile id
        check_ep_for(spec, fmt)
    if fmt in ("megatron", "torchtitan") and spec.job.trainable == "lora":
        raise InputError("--emit", fmt, "deepspeed, torchrun, slurm or k8s for a LoRA job: "
                         f"{'pretrain_gpt.py' if fmt == 'megatron' else 'torchtitan'} trains "
                         "every weight (LoRA runs through NeMo / Megatron-Bridge PEFT or "
                         "torchtune, which trainplan does not write)")
    if fmt == "deepspeed":
        from trainplan.export.deepspeed import render_deepspeed
        return render_deepspeed(spec)
    if fmt == "megatron":
        from trainplan.export.megatron import render_megatron
        return render_megatron(spec)
    if fmt == "torchtitan":
        from trainplan.export.torchtitan import render_torchtitan
        return render_torchtitan(spec)
    if fmt == "accelerate":
        from trainplan.export.accelerate import render_accelerate
        return render_accelerate(spec)
    if fmt in ("torchrun", "slurm", "k8s"):
        from trainplan.export import launch
        return {"torchrun": launch.render_torchrun, "slurm": launch.render_slurm,
                "k8s": launch.render_k8s}[fmt](spec)
    raise InputError("--emit", fmt, " | ".join(FORMATS))


def with_program(spec: LaunchSpec, formats: list[str]) -> LaunchSpec:
    """Point the generic launchers at Megatron's or torchtitan's entry point when emitted too."""
    if "megatron" in formats:
        from trainplan.export.megatron import megatron_args
        return evolve(spec, script="pretrain_gpt.py", script_args=tuple(megatron_args(spec)),
                       python_module=False)
    if "torchtitan" in formats:
        from trainplan.export.torchtitan import torchtitan_program_args
        return evolve(spec, script="torchtitan.train", python_module=True,
                       script_args=tuple(torchtitan_program_args(spec)))
    if "deepspeed" in formats:            # the script reads the emitted DeepSpeed config
        return evolve(spec, script_args=(*spec.script_args, "--deepspeed",
                                          "--deepspeed_config", "ds_config.json"))
    return spec


#: export format -> the packages (export.versions.PINNED) its files are written for
FORMAT_PACKAGES = {"deepspeed": ("deepspeed",), "megatron": ("megatron",),
                   "torchtitan": ("torchtitan",), "accelerate": ("accelerate", "trl", "peft"),
                   "torchtune": ("torchtune",)}


def placeholders_file(spec: LaunchSpec, formats: list[str]) -> str:
    """PLACEHOLDERS.md of a set: the versions, what was filled in, what must still be set."""
    from trainplan.export.facts import (Placeholder, common_placeholders, filled_lines,
                                        placeholders_markdown)
    versions = {name: spec.version(name) for f in formats for name in FORMAT_PACKAGES.get(f, ())}
    items = common_placeholders(spec)
    if "torchtitan" in formats:
        items.append(Placeholder("dataset c4", "torchtitan's registered C4 loader stands in for "
                                 "your data: register your dataset and name it", "torchtitan "
                                 "files (--dataloader.dataset / [training] dataset)"))
    return placeholders_markdown(spec, items, versions, filled_lines(spec))


def emit_files(formats: list[str], out_dir: Path, spec: LaunchSpec, *, force: bool = False,
               extra: dict[str, str] | None = None) -> list[Path]:
    """Render every format and write the files atomically (refusing to overwrite unless force).

    ``extra``: other files ``{name: text}`` written in the same set (a report inside ``--out``),
    after the launch files; a name among the launch files' is an InputError."""
    from trainplan.export.write import write_files

    if not formats:
        raise InputError("--emit", "", "one or more of " + " | ".join(FORMATS))
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise InputError("--emit", bad[0], " | ".join(FORMATS))
    packages = {name: spec.version(name) for f in dict.fromkeys(formats)
                for name in FORMAT_PACKAGES.get(f, ())}
    dockerfile_text = None
    if "k8s" in formats and packages and spec.image is None:
        # the vendor's PyTorch image has no framework: the set builds one that does
        from trainplan.export.versions import dockerfile, image_tag
        dockerfile_text = dockerfile(spec.container_image, packages)
        spec = evolve(spec, image=image_tag(packages))
    launched = with_program(spec, formats)
    files: dict[str, str] = {}
    for fmt in dict.fromkeys(formats):
        if fmt != "k8s":
            files.update(render(fmt, launched if fmt in ("torchrun", "slurm") else spec))
    if "k8s" in formats:           # the pods mount the configs the program reads (a ConfigMap)
        from trainplan.export.launch import render_k8s
        check_spec(launched)
        files.update(render_k8s(launched, {n: t for n, t in files.items() if n.endswith(
            (".toml", ".json", ".py")) or n == "accelerate_config.yaml"}))
    if dockerfile_text is not None:
        files["Dockerfile"] = dockerfile_text
    files["PLACEHOLDERS.md"] = placeholders_file(spec, list(dict.fromkeys(formats)))
    for name, text in (extra or {}).items():
        if name in files:
            raise InputError("--report", name, "a file name other than the launch files' "
                             f"({', '.join(files)})")
        files[name] = text
    return write_files(files, out_dir, force=force,
                       executable=tuple(n for n in files if n.endswith(".sh") or n.endswith(".sbatch")))

# the public API answers bad arguments with InputError (trainplan.contract)
from trainplan.contract import wrap_exports  # noqa: E402

wrap_exports(globals())
