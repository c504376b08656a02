"""Cross-spec consistency checks (model x job x cluster x strategy), done once at the edge.

The rules themselves live once, in :data:`trainplan.costmodel.layout.RULES` (the search applies
the same rules to arrays of candidates); this module turns the first rule a strategy breaks into
an :class:`InputError` naming the field, the value and what would be valid.
"""

from __future__ import annotations

from typing import get_args

from trainplan.conventions import KERNEL_EFFICIENCY_FIELD, AttentionKernel
from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _value(field: str, st: Strategy, job: Job, dp: int):
    if field == "strategy.tp*pp*cp":
        return st.tp * st.pp * st.cp
    if field == "strategy.pp*vp":
        return f"{st.pp}*{st.vp}"
    if field == "job.global_batch":
        return job.batch_sequences
    if field == "strategy.dp":
        return dp
    return getattr(st, field.split(".", 1)[1], None)


def check_job(job: Job, accelerator) -> None:
    """Job settings the framework or the accelerator cannot run (InputError): Liger's fused
    linear cross-entropy or a loss without fp32 logits under the measured plain-PyTorch
    accounting, FlashAttention-3 off Hopper, MXFP8 off Blackwell, a context-parallel exchange
    the framework does not offer."""
    from trainplan.spec.framework import get_framework
    fw = get_framework(job.framework)
    if fw.activations == "hf" and "linear_cross_entropy" in (job.fused_ops or ()):
        raise InputError("job.fused_ops", "linear_cross_entropy",
                         f"fused groups without linear_cross_entropy for framework "
                         f"'{fw.id}': its memory accounting is measured on transformers' own "
                         f"loss; use framework fsdp, torchtitan or deepspeed for Liger's fused "
                         f"linear cross-entropy")
    if fw.activations == "hf" and job.logits_fp32 is False:
        raise InputError("job.logits_fp32", "false",
                         f"true or none for framework '{fw.id}': transformers' ForCausalLMLoss "
                         f"upcasts the logits (logits.float()) and its memory accounting is "
                         f"measured on that loss")
    kernel = job.attention_kernel
    if kernel in _ONLY_WHERE_MEASURED and not getattr(accelerator.efficiency,
                                                      KERNEL_EFFICIENCY_FIELD[kernel]):
        raise InputError("job.attention_kernel", kernel,
                         f"{_kernels_on(accelerator)} or none on {accelerator.id}: "
                         f"{_ONLY_WHERE_MEASURED[kernel]}")
    if job.cp_comm_type is not None and job.cp_comm_type not in fw.offered_cp():
        raise InputError("job.cp_comm_type", job.cp_comm_type,
                         f"{' or '.join(fw.offered_cp())} or none for framework '{fw.id}'")
    if job.fp8_recipe == "mxfp8" and accelerator.arch != "blackwell":
        raise InputError("job.fp8_recipe", "mxfp8",
                         f"delayed, current or none on {accelerator.id}: MXFP8 block scaling "
                         f"runs on Blackwell GPUs (b200, gb200; Transformer Engine MXFP8BlockScaling, "
                         f"Megatron-Core fp8_recipe 'mxfp8')")


#: kernels trainplan times only on parts with their own figure (KERNEL_EFFICIENCY_FIELD), and why
_ONLY_WHERE_MEASURED = {
    "fa1": "trainplan has a FlashAttention-1 rate only for the A100 parts (Dao 2023, "
           "arXiv:2307.08691); flash-attn 1.x runs on Turing, Ampere, Ada and Hopper GPUs, not on "
           "Volta or non-NVIDIA parts (its README at v1.0.4)",
    "fa3": "FlashAttention-3 runs on Hopper GPUs (h100, h200, h800, gh200)"}


def _kernels_on(accelerator) -> str:
    """The attention kernels trainplan times on ``accelerator``, for an error message."""
    return ", ".join(k for k in get_args(AttentionKernel) if k not in _ONLY_WHERE_MEASURED
                     or getattr(accelerator.efficiency, KERNEL_EFFICIENCY_FIELD[k]))


def check_frozen(model: Model, job: Job) -> None:
    """Every name in ``job.frozen`` is one of the model's stacks or projectors (or 'projector'
    for all of them): a misspelt name would otherwise freeze nothing, silently. A full
    fine-tune must leave some part trained (``vision_flops.trainable_parts`` for the towers and
    projectors, the decoder by its name)."""
    from trainplan.costmodel.vision_flops import projector_name, trainable_parts
    n = len(model.projectors)
    names = [st.name for st in model.stacks] + [projector_name(i, n) for i in range(n)] \
        + (["projector"] if n > 1 else [])
    for name in job.frozen:
        if name not in names:
            raise InputError("job.frozen", name, f"one of the model's stacks or projectors: "
                             f"{', '.join(names)}")
    vision_names = [v.name for v in model.vision] + [projector_name(i, n) for i in range(n)] \
        + (["projector"] if n else [])
    for name in job.trained_in_full:
        if job.trainable != "lora":
            raise InputError("job.trained_in_full", list(job.trained_in_full),
                             "empty unless trainable = lora (a full fine-tune trains every part "
                             "not in frozen)")
        if name not in vision_names:
            raise InputError("job.trained_in_full", name, "a vision tower or projector of the "
                             f"model: {', '.join(dict.fromkeys(vision_names)) or 'none'}")
    trained = [model.decoder.name not in job.frozen, *trainable_parts(model, job).values()]
    if job.trainable == "full" and not any(trained):
        raise InputError("job.frozen", list(job.frozen), "a list that leaves some part of the "
                         "model trained (every stack and projector is frozen, so nothing would "
                         "train)", hint="to train adapters on a frozen base, use trainable = "
                         "\"lora\" (--lora)")
    check_base_weights(model, job)


def check_base_weights(model: Model, job: Job) -> None:
    """A 4-bit base (``job.base_weights``) is frozen: bitsandbytes' ``Linear4bit`` weights take
    no gradient (transformers ``integrations/bitsandbytes.py`` ``replace_with_bnb_linear``:
    ``requires_grad_(False)``), so the decoder must be frozen (LoRA, or its name in
    ``job.frozen``); and its GEMMs run in the dequantized compute dtype, not in FP8."""
    if job.base_weights is None:
        return
    dec = model.decoder.name
    if job.trainable != "lora" and dec not in job.frozen:
        raise InputError("job.base_weights", job.base_weights,
                         f"none unless the decoder's weights are frozen: trainable = lora "
                         f"(--lora) or '{dec}' in job.frozen (4-bit weights take no gradient)",
                         hint="QLoRA is --lora --base-weights nf4")
    if job.precision == "fp8_mixed":
        raise InputError("job.base_weights", job.base_weights,
                         "none with precision fp8_mixed: bitsandbytes dequantizes 4-bit weights "
                         "to the compute dtype for each GEMM (use bf16_mixed, bf16_pure, "
                         "fp16_mixed or fp32)")


def default_zero(fw, pp: int) -> int:
    """The stage a strategy without one runs: the framework's ``default_zero`` (with a pipeline
    its ``default_zero_with_pp``, else that capped at ``max_zero_with_pp``), the highest stage
    it offers at or below that."""
    with_pp = fw.default_zero if fw.default_zero_with_pp is None else fw.default_zero_with_pp
    cap = fw.default_zero if pp == 1 else min(with_pp, fw.max_zero_with_pp)
    return max((z for z in fw.zero_stages if z <= cap), default=min(fw.zero_stages))


def coupled_offload(fw, st: Strategy) -> Strategy:
    """Where the framework offloads parameters, gradients and the optimizer step together
    (``FrameworkProfile.offload_together``: FSDP's CPU offload), a strategy that names one of
    offload_optimizer and offload_params gets the other too; naming both differently stays an
    error (layout.RULES)."""
    given = st.model_fields_set
    if not fw.offload_together or ("offload_optimizer" in given) == ("offload_params" in given):
        return st
    on = st.offload_optimizer if "offload_optimizer" in given else st.offload_params
    if on and st.zero != 3:
        raise InputError("strategy.offload_optimizer", True,
                         f"false unless zero = 3 in the {fw.id} framework: its CPU offload (FSDP "
                         "CPUOffload) moves the sharded parameters with the optimizer",
                         hint="set zero = 3")
    return evolve(st, offload_optimizer=on, offload_params=on)


def complete_strategy(model: Model, job: Job, cluster: Cluster, st: Strategy) -> Strategy:
    """Check a strategy against the model, job, cluster and framework; derive dp.
    Raises InputError."""
    from trainplan.spec.framework import get_framework
    from trainplan.costmodel.layout import Layout, context, first_broken

    mp = st.tp * st.pp * st.cp
    if cluster.gpus % mp:
        raise InputError("strategy.tp*pp*cp", mp, f"a divisor of the GPU count {cluster.gpus}")
    dp = st.dp or cluster.gpus // mp
    if st.dp and st.dp * mp != cluster.gpus:
        raise InputError("strategy.dp", st.dp,
                         f"gpus / (tp*pp*cp) = {cluster.gpus} / {mp} = {cluster.gpus // mp}")
    fw = get_framework(job.framework)
    check_job(job, cluster.accelerator)
    check_frozen(model, job)
    defaults = {}                      # the framework's defaults for what the strategy omits
    if st.recompute is None:
        defaults["recompute"] = "selective" if "selective" in fw.recompute else "none"
    if "zero" not in st.model_fields_set:
        defaults["zero"] = default_zero(fw, st.pp)
    if defaults:
        st = evolve(st, **defaults)
    st = coupled_offload(fw, st)
    L = Layout.of(st, dp)
    ctx = context(model, job, cluster.gpus, fw)._replace(uneven=st.uneven_stages)
    rule = first_broken(L, ctx)
    if rule is not None:
        hint = None
        if rule.field == "job.global_batch":
            ok = [mb for mb in _divisors(job.batch_sequences)
                  if (job.batch_sequences // mb) % dp == 0]
            hint = (f"micro-batches that work with dp={dp}: {ok[:8]}" if ok else
                    f"no micro-batch works: make the global batch a multiple of dp={dp}")
        raise InputError(rule.field, _value(rule.field, st, job, dp), rule.valid(L, ctx),
                         hint=hint)
    return evolve(st, dp=dp)
