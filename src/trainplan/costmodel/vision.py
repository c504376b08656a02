"""Vision tower and projector costs for vision-language models (first pipeline stage).

For a model without vision stacks every quantity is zero. For a VLM: the encoder runs on each
image (non-causal attention over its patches), the projector maps its output to the decoder
width; frozen parts get no weight gradients and keep no optimizer states, but their forward
(and activation gradients, where a trainable part sits below... none does for a tower at the
bottom) still cost time.
"""

from __future__ import annotations

from typing import Any

from trainplan.costmodel.flops import stack_forward_flops_per_token
from trainplan.costmodel.params import projector_params, stack_params


def image_tokens(stack, image_size: int | None = None) -> int:
    """Patches the encoder sees per image: (H/p)^2 (+1 class token); conv drops remainders."""
    side = (image_size or stack.image_size) // stack.patch_size
    return side * side * stack.temporal_patch // stack.temporal_patch + (1 if stack.class_token else 0)


def vision_costs(model, job, L) -> dict[str, Any]:
    """Parameters, FLOPs, activation bytes and time of the vision side, per the job."""
    out = dict(params=0.0, trainable_params=0.0, model_flops_step=0.0, act_bytes_per_mb=0.0,
               time_per_mb=0.0, data_time_step=0.0)
    if not model.vision or job.images_per_sample <= 0:
        if model.vision:
            out["params"] = float(sum(stack_params(v).total for v in model.vision)
                                  + sum(projector_params(p) for p in model.projectors))
            out["trainable_params"] = 0.0 if all(v.name in job.frozen for v in model.vision) \
                else out["params"]
        return out
    images_step = job.batch_sequences * job.images_per_sample
    total, trainable, flops = 0.0, 0.0, 0.0
    for v in model.vision:
        n = stack_params(v).total
        total += n
        tok = image_tokens(v, job.image_size)
        f = stack_forward_flops_per_token(v, tok, causal=False) * tok
        frozen = v.name in job.frozen
        trainable += 0.0 if frozen else n
        flops += images_step * f * (1.0 if frozen else 3.0)
    for i, p in enumerate(model.projectors):
        n = projector_params(p)
        total += n
        name = f"projector{i}" if len(model.projectors) > 1 else "projector"
        trainable += 0.0 if name in job.frozen else n
    out.update(params=total, trainable_params=trainable, model_flops_step=flops)
    return out
