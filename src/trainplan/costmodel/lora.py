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
runs the same two products, scale and sum; the same counts are used for every framework. Not
counted: PEFT's cast of the input to an fp32 adapter's dtype (``_cast_input_dtype``), which
depends on the adapter dtype and autocast, and the adapters' activations (r per token per
matrix, a fraction of a percent of a layer's).
"""

from __future__ import annotations

from trainplan.costmodel import ops as opinv
from trainplan.costmodel.params import lora_params
from trainplan.costmodel.timing import memory_time
from trainplan.spec.model import Stack

#: activation elements per output feature that PEFT's ``* scaling`` (read, write) and ``+``
#: (read two, write one) move in the forward, and the backward's scaling of the gradient; per
#: input feature, the backward's sum of the adapter's and the base's input gradients
SCALE_ADD_FORWARD_IO, SCALE_BACKWARD_IO, GRAD_SUM_IO = 5.0, 2.0, 3.0
#: eager kernels per adapted matrix: forward A, B, mul, add; backward two input-gradient and
#: two weight-gradient GEMMs, the mul and the gradient sum
KERNELS_FORWARD, KERNELS_BACKWARD = 4.0, 6.0


def adapted_matrices(stack: Stack) -> tuple[float, float, float]:
    """(adapted matrices, their summed input features, their summed output features) of one
    layer: every linear layer of :func:`trainplan.costmodel.ops.gemms` but the router, as
    :func:`~trainplan.costmodel.params.lora_params` adapts them (q, k, v, o and the MLP's; a
    fused op such as qkv is its matrices, each reading the op's input)."""
    mats = [op for op in opinv.gemms(stack) if op.name != "router"]
    return (sum(op.gemms for op in mats), sum(op.d_in * op.gemms for op in mats),
            sum(op.d_out for op in mats))


def adapter_time(km, stack: Stack, T, tp, r: int):
    """(forward s, backward s, forward kernels, backward kernels) of one layer's adapters for T
    tokens, their GEMMs on the saturation curve (``km.gemm``, BF16) and their scale-and-add at
    the HBM rate of eager kernels; TP splits them as it splits the matrices they adapt."""
    n, d_in, d_out = adapted_matrices(stack)
    flops = T * 2.0 * lora_params(stack, r) / stack.layers / tp
    gemm = km.gemm(flops, 2.0 * n)
    per = T / tp * km.act_b                       # bytes per feature
    fwd = gemm + memory_time(SCALE_ADD_FORWARD_IO * d_out * per, km.hbm, km.eta_hbm)
    bwd = 2.0 * gemm + memory_time((SCALE_BACKWARD_IO * d_out + GRAD_SUM_IO * d_in) * per,
                                   km.hbm, km.eta_hbm)
    return fwd, bwd, KERNELS_FORWARD * n, KERNELS_BACKWARD * n
