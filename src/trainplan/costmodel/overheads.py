"""Implementation profiles: what a framework keeps beyond the textbook model states.

The textbook (ZeRO paper) counts 2 + 2 + 12 bytes per parameter; real frameworks differ:

* Megatron-LM with bf16 accumulates and all-reduces gradients in fp32 (its ``main_grad``
  buffer; ``accumulate_allreduce_grads_in_fp32`` is forced on for bf16 in
  ``megatron/training/arguments.py``), so gradients cost 4 bytes per parameter.
* The CUDA context and NCCL communicators take memory outside the PyTorch allocator
  (about 0.5-1 GiB per process on Hopper; we budget 1 GiB).
* The caching allocator fragments; we reserve 5% on top of the allocated peak, an explicit
  assumption (measure yours with ``torch.cuda.max_memory_reserved`` / ``max_memory_allocated``).

``trainplan measure memory`` compares these profiles with real PyTorch traces.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.conventions import GiB


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
    source: str


def implementation_profile(name: str, precision: str) -> ImplementationProfile:
    """The profile for a framework; see the module docstring for each number's basis."""
    mixed = precision in ("bf16_mixed", "fp16_mixed", "fp8_mixed")
    if name == "megatron":
        return ImplementationProfile(
            "megatron", 4.0 if mixed else None, True, False, 1.0 * GiB, 0.0, 0.05, 20.0, 1.0,
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
        # DDP buckets: bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel)
        return ImplementationProfile(
            "pytorch", None, True, False, 0.0, 2 * 25 * 2**20, 0.0, 40.0, 1.0,
            "plain PyTorch/transformers eager; DDP bucket_cap_mb=25")
    return ImplementationProfile("analytic", None, False, False, 0.0, 0.0, 0.0, 20.0, 1.0,
                                 "textbook: ZeRO paper model states + Korthikanti activations")
