"""MFU for the scaling-laws module (``trainplan.scaling.budget.achievable_mfu``): the fastest
layout's MFU of the model ``trainplan scale`` proposes, at the batch it writes."""

from __future__ import annotations

from functools import lru_cache

from trainplan.errors import InputError
from trainplan.search.plan import plan_specs
from trainplan.search.space import SearchSpace
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model


REPRESENTATIVE_SEQ_LEN = 4096


def representative_batch(gpus: int) -> int:
    """The global batch (sequences) :func:`best_mfu` plans with: at least 1,024 sequences, a
    multiple of the GPU count, and one sequence per 4 GPUs above 1,024 GPUs (what a job file
    written from the budget, ``scale --emit-model``, must carry for its plan to match)."""
    return gpus * max(1, -(-1024 // gpus)) if gpus <= 1024 else gpus // 4


@lru_cache(maxsize=512)
def best_mfu(gpu: str, gpus: int, model: Model) -> tuple[float, str, float, float]:
    """MFU of the fastest layout of ``model`` (the architecture ``trainplan scale`` proposes)
    on ``gpus`` x ``gpu``, that layout's goodput, and the share of its model FLOPs that the
    scaling laws' C = 6ND counts.

    The job trains 4,096-token sequences in bf16 (fp16 where the GPU has no bf16) with AdamW
    at :func:`representative_batch`, over ``plan``'s default search space with uneven pipeline
    stages open, so a layer count that few pipeline sizes divide does not sink the answer
    (``scale --emit-model`` writes the same search option, so ``plan`` of that file searches
    the same layouts). The goodput is the share of wall-clock left after the expected
    failures, restarts and checkpoints at the cluster's default reliability assumptions
    (``costmodel.totals.run_totals``; it does not depend on the run's length). The 6ND share
    is 6 x parameters x tokens over the model FLOPs of a step, which also count causal
    attention (PaLM, Chowdhery et al. 2022, App. B), so that a budget in 6ND FLOPs buys the
    steps the hardware runs. Returns (MFU, one-line description, goodput, 6ND share); when
    nothing fits (too large a model for the GPUs) (0.0, the reason, 0.0, 0.0).
    """
    from trainplan.catalog.accelerators import get_accelerator

    acc = get_accelerator(gpu)
    batch = representative_batch(gpus)
    job = Job(seq_len=REPRESENTATIVE_SEQ_LEN, global_batch=batch, tokens=batch * REPRESENTATIVE_SEQ_LEN,
              precision=acc.mixed_precision, optimizer="adamw")
    template = Cluster(accelerator=acc, gpus=1)
    space = SearchSpace(uneven_stages=True)     # plan's own space, as for the emitted job file
    d = model.decoder
    shape = f"{model.name} (L{d.layers} h{d.hidden} a{d.heads} kv{d.n_kv})"
    try:
        r, _ = plan_specs(model, job, template, [acc], [int(gpus)], objective="fastest", top=1,
                          space=space)
    except InputError as e:
        return 0.0, f"{shape} on {gpus}x {acc.id}: no layout ({e})", 0.0, 0.0
    w = r.winner
    g = float(w.totals.goodput) if w.totals.goodput is not None else 1.0
    share = w.six_nd_per_step / w.model_flops_per_step
    return (w.mfu, f"{shape} on {gpus}x {acc.id}: {w.layout}, MFU {w.mfu:.1%}, goodput {g:.1%}, "
                   f"6ND {share:.1%} of its model FLOPs", g, share)
