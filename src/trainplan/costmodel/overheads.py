"""The v0.1 names of the measured plain-PyTorch accounting, re-exported.

Plain PyTorch + transformers (framework profile ``pytorch``) was *measured* tensor by tensor with
``trainplan measure memory``; that accounting lives in :mod:`trainplan.costmodel.hf_memory`
(per-tensor activations) and :mod:`trainplan.costmodel.hf_step` (the step's peak). What each
framework keeps beyond the textbook model states (gradient dtype, context and NCCL memory,
buckets, allocator reserve) is data: ``catalog/data/frameworks.json``.
"""

from __future__ import annotations

from trainplan.costmodel.hf_memory import (_elem, _is_gpt2, hf_head_activation_bytes,
                                           hf_layer_activation_bytes, hf_layer_activation_parts,
                                           hf_vision_head_bytes)
from trainplan.costmodel.hf_step import (PEAK_PHASES, eager_attention_backward_bytes,
                                         hf_loss_backward_bytes, hf_step_memory,
                                         matmul_weight_params, mlp_backward_bytes)

# the v0.1 names of the measured 'pytorch' accounting (callers import them from here)
__all__ = ["PEAK_PHASES", "_elem", "_is_gpt2",
           "eager_attention_backward_bytes", "hf_head_activation_bytes",
           "hf_layer_activation_bytes", "hf_layer_activation_parts", "hf_loss_backward_bytes",
           "hf_step_memory", "hf_vision_head_bytes", "matmul_weight_params",
           "mlp_backward_bytes"]
