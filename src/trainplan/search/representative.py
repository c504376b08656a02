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
def best_mfu(gpu: str, gpus: int, model: Model) -> tuple[float, str]:
    """MFU of the fastest layout of ``model`` (the architecture ``trainplan scale`` proposes)
    on ``gpus`` x ``gpu``.

    The job trains 4,096-token sequences in bf16 (fp16 where the GPU has no bf16) with AdamW
    at :func:`representative_batch`; the search opens uneven pipeline stages, so a layer count
    that few pipeline sizes divide does not sink the answer (``scale --emit-model`` writes the
    same search option). Returns (MFU, one-line description); when nothing fits (too large a
    model for the GPUs) (0.0, the reason).
    """
    from trainplan.catalog.accelerators import get_accelerator

    acc = get_accelerator(gpu)
    job = Job(seq_len=REPRESENTATIVE_SEQ_LEN, global_batch=representative_batch(gpus),
              precision=acc.mixed_precision, optimizer="adamw")
    template = Cluster(accelerator=acc, gpus=1)
    space = SearchSpace(recompute=("none", "selective", "full"), max_micro_batch=8, max_vp=4,
                        uneven_stages=True)
    d = model.decoder
    shape = f"{model.name} (L{d.layers} h{d.hidden} a{d.heads} kv{d.n_kv})"
    try:
        r, _ = plan_specs(model, job, template, [acc], [int(gpus)], objective="fastest", top=1,
                          space=space)
    except InputError as e:
        return 0.0, f"{shape} on {gpus}x {acc.id}: no layout ({e})"
    w = r.winner
    return w.mfu, f"{shape} on {gpus}x {acc.id}: {w.layout}, MFU {w.mfu:.1%}"
