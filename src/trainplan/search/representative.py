"""Representative MFU for the scaling-laws module (``trainplan.scaling.budget.achievable_mfu``):
the fastest layout's MFU of a Llama-style dense model of a given size."""

from __future__ import annotations

from functools import lru_cache

from trainplan.errors import InputError
from trainplan.search.plan import plan_specs
from trainplan.search.space import SearchSpace
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model


def representative_model(n_params: float) -> Model:
    """A Llama-style dense decoder of about ``n_params`` parameters.

    Width from the Llama-3 aspect ratio (hidden ~ 128 x layers, so N ~ 12 L h^2 gives
    h ~ (128 N / 12)^(1/3), rounded to 256); 128-wide heads, 8 KV heads (GQA), SwiGLU FFN of
    3.5 h, a 128,256-token vocabulary, untied embeddings; then the layer count (a multiple of
    4 above 8) that brings the exact parameter count closest to ``n_params``.
    """
    from trainplan.costmodel.params import stack_params
    from trainplan.io.limits import check_range
    from trainplan.spec.model import Stack

    n_params = check_range("n_params", n_params, 1e6, 1e16)

    # a multiple of 1024 above 1024 keeps heads (h / 128) a multiple of the 8 KV heads
    h = max(256, int(round((128.0 * n_params / 12.0) ** (1.0 / 3.0) / 256.0)) * 256)
    if h > 1024:
        h = int(round(h / 1024.0)) * 1024
    heads = h // 128
    kv = min(8, heads)
    ffn = int(round(3.5 * h / 256.0)) * 256
    base = dict(name="decoder", hidden=h, heads=heads, kv_heads=kv, ffn_hidden=ffn, vocab=128256)
    one = stack_params(Stack(layers=1, **base))
    per_layer = one.per_dense_layer
    rest = one.total - per_layer
    layers = max(2, int(round((n_params - rest) / per_layer)))
    if layers > 8:
        layers = max(8, int(round(layers / 4.0)) * 4)
    return Model(name=f"llama-style-{n_params / 1e9:.3g}B", stacks=(Stack(layers=layers, **base),),
                 source="trainplan.search.representative_model")


REPRESENTATIVE_SEQ_LEN = 4096


def representative_batch(gpus: int) -> int:
    """The global batch (sequences) :func:`best_mfu` plans with: at least 1,024 sequences, a
    multiple of the GPU count, and one sequence per 4 GPUs above 1,024 GPUs (what a job file
    written from the budget, ``scale --emit-model``, must carry for its plan to match)."""
    return gpus * max(1, -(-1024 // gpus)) if gpus <= 1024 else gpus // 4


@lru_cache(maxsize=512)
def best_mfu(gpu: str, gpus: int, n_params: float) -> tuple[float, str]:
    """MFU of the fastest layout of a representative dense model of ``n_params`` on ``gpus``.

    The model is :func:`representative_model`; the job trains 4,096-token sequences in bf16
    (fp16 where the GPU has no bf16) with AdamW at a global batch of at least 1,024 sequences (and at least one sequence per 4
    GPUs, a multiple of the GPU count's data-parallel sizes). Returns (MFU, one-line
    description). When nothing fits (too large a model for the GPUs) it returns
    (0.0, the reason).
    """
    from trainplan.catalog.accelerators import get_accelerator

    acc = get_accelerator(gpu)
    m = representative_model(float(n_params))
    job = Job(seq_len=REPRESENTATIVE_SEQ_LEN, global_batch=representative_batch(gpus),
              precision=acc.mixed_precision, optimizer="adamw")
    template = Cluster(accelerator=acc, gpus=1)
    space = SearchSpace(recompute=("none", "selective", "full"), max_micro_batch=8, max_vp=4)
    d = m.decoder
    shape = f"{m.name} (L{d.layers} h{d.hidden} a{d.heads} kv{d.n_kv})"
    try:
        r, _ = plan_specs(m, job, template, [acc], [int(gpus)], objective="fastest", top=1,
                          space=space)
    except InputError as e:
        return 0.0, f"{shape} on {gpus}x {acc.id}: no layout ({e})"
    w = r.winner
    return w.mfu, f"{shape} on {gpus}x {acc.id}: {w.layout}, MFU {w.mfu:.1%}"
