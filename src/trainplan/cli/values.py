"""Option values turned into job fields and lists, shared by the commands (through
:mod:`trainplan.cli.cmdoptions`, which re-exports them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def gpu_of(gpu: Optional[str], gpu_file: Optional[Path]) -> Optional[str | Path]:
    """The cluster's ``gpu``: ``--gpu``, or the ``--gpu-file`` path (``resolve_gpu`` reads it)."""
    if gpu_file is not None and gpu is not None:
        from trainplan.errors import InputError
        raise InputError("--gpu-file", str(gpu_file), f"given without --gpu ({gpu!r}): give the GPU once")
    return gpu if gpu_file is None else gpu_file


def split_list(values: Optional[list[str]]) -> list[str]:
    """Repeated and comma-separated values as one list: ['a,b', 'c'] -> ['a', 'b', 'c']."""
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def as_path(p: Optional[Path]) -> Optional[str]:
    return str(p) if p else None


def trainable(lora: Optional[bool], lora_rank: Optional[int]) -> Optional[str]:
    """job.trainable from --lora/--full and --lora-rank (a rank alone means LoRA)."""
    if lora is None:
        return "lora" if lora_rank is not None else None
    return "lora" if lora else "full"


def image_size(text: Optional[str]) -> dict[str, Any]:
    """--image-size as job fields: "448" -> image_size, "896x1344" (height x width) ->
    image_resolutions [[896, 1344, 1]]."""
    if text is None:
        return {}
    from trainplan.errors import InputError
    parts = str(text).lower().replace(" ", "").split("x")
    try:
        sides = [int(p) for p in parts]
    except ValueError:
        sides = []
    if len(sides) not in (1, 2) or min(sides, default=0) <= 0:
        raise InputError("--image-size", text, "a side in pixels (448) or HxW (896x1344)")
    if len(sides) == 1:
        return {"image_size": sides[0]}
    return {"image_resolutions": [[sides[0], sides[1], 1.0]]}


def lora_targets(value: Optional[str]) -> Any:
    """job.lora_targets from --lora-targets: a set's name or a comma list (None: not given)."""
    return None if value is None else tuple(split_list([value]))
