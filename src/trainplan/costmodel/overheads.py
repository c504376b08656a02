"""Implementation profiles: what a framework keeps beyond the textbook model states.

The textbook (ZeRO paper) counts 2 + 2 + 12 bytes per parameter and Korthikanti et al. count the
activations of Megatron-LM's fused kernels; real frameworks differ:

* Megatron-LM with bf16 accumulates and all-reduces gradients in fp32 (its ``main_grad``
  buffer; ``accumulate_allreduce_grads_in_fp32`` is forced on for bf16 in
  ``megatron/training/arguments.py``), so gradients cost 4 bytes per parameter, and the buffer
  lives for the whole step (``grads_persistent``).
* The CUDA context and NCCL communicators take memory outside the PyTorch allocator
  (about 0.5-1 GiB per process on Hopper; we budget 1 GiB).
* The caching allocator fragments; we reserve 5% on top of the allocated peak, an explicit
  assumption (measure yours with ``torch.cuda.max_memory_reserved`` / ``max_memory_allocated``).

Plain PyTorch + transformers (profile ``pytorch``) was *measured* tensor by tensor with
``trainplan measure memory``; that accounting lives in :mod:`trainplan.costmodel.hf_memory`
(per-tensor activations) and :mod:`trainplan.costmodel.hf_step` (the step's peak), re-exported
here for callers of the v0.1 names.

Megatron-LM, DeepSpeed and FSDP keep the Korthikanti accounting (fused kernels, bf16 residual
stream) and persistent gradient buffers; they were not measured here (no GPU), and are
documented with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.conventions import GiB
from trainplan.costmodel.hf_memory import (_elem, _is_gpt2, hf_head_activation_bytes,
                                           hf_layer_activation_bytes, hf_layer_activation_parts,
                                           hf_vision_head_bytes)
from trainplan.costmodel.hf_step import (PEAK_PHASES, eager_attention_backward_bytes,
                                         hf_loss_backward_bytes, hf_step_memory,
                                         matmul_weight_params, mlp_backward_bytes)

# the v0.1 names of the measured 'pytorch' accounting (callers import them from here)
__all__ = ["ImplementationProfile", "implementation_profile", "PEAK_PHASES", "_elem", "_is_gpt2",
           "eager_attention_backward_bytes", "hf_head_activation_bytes",
           "hf_layer_activation_bytes", "hf_layer_activation_parts", "hf_loss_backward_bytes",
           "hf_step_memory", "hf_vision_head_bytes", "matmul_weight_params",
           "mlp_backward_bytes"]


@dataclass(frozen=True)
class ImplementationProfile:
    name: str
    grad_bytes: float | None       # bytes per gradient element (None: from the precision table)
    logits_fp32: bool              # the loss keeps an fp32 copy of the logits
    dropout: bool                  # dropout masks kept (GPT-style training); Llama-style: no
    fixed_bytes: float             # CUDA context + NCCL communicators
    comm_buffer_bytes: float       # DDP/ZeRO bucket buffers beyond the gradients themselves
    fragmentation: float           # allocator reserve as a share of allocated
    kernels_per_layer: float       # kernels launched per layer forward (launch overhead)
    tp_exposed: float              # share of TP collectives not overlapped with compute
    # Assumptions, not measurements: kernels_per_layer is a round count of one layer's forward
    # launches (fused Megatron kernels 20, DeepSpeed/FSDP 30, eager PyTorch 40); tp_exposed = 1
    # (no overlap of the forward TP collectives).
    source: str
    # --- measured with `trainplan measure memory` (see the module docstring, items 1-6) ---
    activations: str = "korthikanti"   # "hf": hf_layer_activation_bytes / hf_head_activation_bytes
    param_bytes: float | None = None   # bytes of the parameter itself when it is the master copy
    weight_cast_bytes: float = 0.0     # autocast copies of matmul weights, per weight
    optimizer_temp_bytes: float = 0.0  # optimizer-step temporaries, in moment-sized buffers
    grads_persistent: bool = True      # gradient buffers live through forward and backward
    tp_bwd_overlap: float = 0.5        # share of backward TP all-reduce hidden (evaluate.py)


def implementation_profile(name: str, precision: str) -> ImplementationProfile:
    """The profile for a framework; see the module docstring for each number's basis."""
    if name == "megatron":
        return ImplementationProfile(
            # fp32 main grads are forced for bf16 (accumulate_allreduce_grads_in_fp32 in
            # megatron/training/arguments.py); fp16 keeps 16-bit gradients by default
            "megatron", 4.0 if precision in ("bf16_mixed", "fp8_mixed") else None, True, False,
            1.0 * GiB, 0.0, 0.05, 20.0, 1.0,
            "Megatron-LM: fp32 main grads for bf16 (arguments.py), fused kernels")
    if name == "deepspeed":
        # reduce_bucket_size and allgather_bucket_size default 5e8 elements (DeepSpeed
        # runtime/zero/config.py); one bucket of each in 16 bits
        return ImplementationProfile(
            "deepspeed", None, True, False, 1.0 * GiB, 2 * 5e8 * 2.0, 0.05, 30.0, 1.0,
            "DeepSpeed ZeRO: reduce/allgather buckets 5e8 elements (runtime/zero/config.py)")
    if name == "fsdp":
        return ImplementationProfile(
            "fsdp", None, True, False, 1.0 * GiB, 0.0, 0.05, 30.0, 1.0,
            "PyTorch FSDP2 / torchtitan: grads in param dtype, fp32 reduce optional")
    if name == "pytorch":
        # DDP buckets: bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel);
        # the rest measured with `trainplan measure memory` (hf_memory docstring, items 1-6)
        amp = precision == "bf16_mixed" or precision == "fp16_mixed"
        return ImplementationProfile(
            "pytorch", 4.0 if amp else None, True, False, 0.0, 2 * 25 * 2**20, 0.0, 40.0, 1.0,
            "plain PyTorch/transformers eager, torch.amp autocast, foreach AdamW, "
            "zero_grad(set_to_none); measured by trainplan measure memory",
            activations="hf", param_bytes=4.0 if amp else None,
            weight_cast_bytes=2.0 if amp else 0.0, optimizer_temp_bytes=1.0,
            grads_persistent=False)
    return ImplementationProfile("analytic", None, False, False, 0.0, 0.0, 0.0, 20.0, 1.0,
                                 "textbook: ZeRO paper model states + Korthikanti activations")
