"""LoRA adapters' own work in a layer: the adapter GEMMs and the scale-and-add of their output.

LoRA (Hu et al. 2021, sec. 4.1) adds ``B(A(x)) * scaling`` to each adapted linear layer's
output, A of shape r x d_in and B of d_out x r. As Hugging Face PEFT runs it (peft/tuners/lora/
layer.py ``Linear.forward`` at huggingface/peft 5d602fd: ``result = result +
lora_B(lora_A(dropout(x))) * scaling``; ``lora_dropout`` defaults to 0.0 in config.py, which
makes ``dropout`` an ``nn.Identity``) each adapted matrix costs two small GEMMs in the forward,
one product with the scaling (read and write d_out per token) and one addition to the base
output (read two, write one), all eager kernels. The backward runs the GEMMs' input gradients
and the adapters' own weight gradients (four GEMMs), scales the incoming gradient once (read
and write d_out) and adds the adapter's input gradient to the base's (read two, write one d_in:
autograd's sum of the two paths into x). tests/unit/costmodel/test_lora.py checks these against
the operations a real torch backward dispatches. The frozen base's weight gradients are not run
(``flops.step_flops``). torchtune's ``LoRALinear.forward`` (torchtune/modules/peft/lora.py)
runs the same two products, scale and sum, and so does NeMo's ``LoRALinear`` with its
``ParallelLinearAdapter`` (nemo/collections/llm/peft/lora.py at NVIDIA/NeMo a9a2b2e: the base
output plus ``linear_out(linear_in(x))`` scaled by alpha / dim). These counts are each
framework profile's ``lora_kernels`` (catalog/data/frameworks.json), PEFT's where a profile
names none. Which matrices are adapted is the job's ``lora_targets``
(:func:`~trainplan.costmodel.params.lora_matrices`). The adapters' activations are counted in
memory (:func:`adapter_kept_bytes_per_token`). Not counted in time: PEFT's cast of the input
to an fp32 adapter's dtype (``_cast_input_dtype``).
"""

from __future__ import annotations

from trainplan.costmodel.params import lora_matrices, lora_params
from trainplan.costmodel.timing import memory_time
from trainplan.spec.model import Stack

#: activation elements per output feature that PEFT's ``* scaling`` (read, write) and ``+``
#: (read two, write one) move in the forward, and the backward's scaling of the gradient; per
#: input feature, the backward's sum of the adapter's and the base's input gradients
SCALE_ADD_FORWARD_IO, SCALE_BACKWARD_IO, GRAD_SUM_IO = 5.0, 2.0, 3.0
#: eager kernels per adapted matrix: forward A, B, mul, add; backward two input-gradient and
#: two weight-gradient GEMMs, the mul and the gradient sum
KERNELS_FORWARD, KERNELS_BACKWARD = 4.0, 6.0


def adapted_matrices(stack: Stack, targets=None) -> tuple[float, float, float]:
    """(adapted matrices, their summed input features, their summed output features) of one
    layer: the ``targets`` projections (:func:`~trainplan.costmodel.params.lora_matrices`; a
    fused op such as Megatron's linear_qkv is its matrices, each reading the op's input)."""
    mats = lora_matrices(stack, targets)
    return (float(len(mats)), float(sum(i for i, _ in mats)), float(sum(o for _, o in mats)))


def lora_kernel_counts(fw) -> tuple[float, float, float, float, float]:
    """(forward_io, backward_io, grad_sum_io, kernels_forward, kernels_backward) of the
    framework's adapters (its profile's ``lora_kernels``; PEFT's eager op sequence, this
    module's constants, for the keys it does not name)."""
    k = getattr(fw, "lora_kernels", None) or {}
    return (k.get("forward_io", SCALE_ADD_FORWARD_IO), k.get("backward_io", SCALE_BACKWARD_IO),
            k.get("grad_sum_io", GRAD_SUM_IO), k.get("kernels_forward", KERNELS_FORWARD),
            k.get("kernels_backward", KERNELS_BACKWARD))


def adapter_time(km, stack: Stack, T, tp, r: int, targets=None):
    """(forward s, backward s, forward kernels, backward kernels) of one layer's adapters for T
    tokens, their GEMMs on the saturation curve (``km.gemm``, BF16) and their scale-and-add at
    the HBM rate of eager kernels (the framework's :func:`lora_kernel_counts`); TP splits them
    as it splits the matrices they adapt."""
    n, d_in, d_out = adapted_matrices(stack, targets)
    f_io, b_io, g_io, kf, kb = lora_kernel_counts(km.fw)
    flops = T * 2.0 * lora_params(stack, r, targets) / stack.layers / tp
    gemm = km.gemm(flops, 2.0 * n)
    per = T / tp * km.act_b                       # bytes per feature
    fwd = gemm + memory_time(f_io * d_out * per, km.hbm, km.eta_hbm)
    bwd = 2.0 * gemm + memory_time((b_io * d_out + g_io * d_in) * per, km.hbm, km.eta_hbm)
    return fwd, bwd, kf * n, kb * n


def adapter_kept_bytes_per_token(stack: Stack, r: int, targets=None, amp: bool = False,
                                 elem: float = 2.0) -> float:
    """Bytes one layer's adapters keep for the backward, per token: each adapted matrix's A
    output (r elements, saved by ``lora_B`` for its weight gradient; Hu et al. 2021 sec. 4.1:
    h = W0 x + B A x), in the compute dtype ``elem``. With fp32 adapters under torch.autocast
    (PEFT casts its adapters to fp32, ``autocast_adapter_dtype=True`` in
    ``get_peft_model``; ``amp``) ``lora_A`` also keeps its own bf16 copy of its input (d_in):
    PEFT's ``_cast_input_dtype`` (peft/tuners/tuners_utils.py) turns x into the adapter's fp32,
    which ``F.linear`` under autocast casts back to a new bf16 tensor, saved for A's weight
    gradient; without that cast ``lora_A`` reads the tensor the base layer saves already."""
    mats = lora_matrices(stack, targets)
    return float(sum(elem * r + (2.0 * i if amp else 0.0) for i, _ in mats))
