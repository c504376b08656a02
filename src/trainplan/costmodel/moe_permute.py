"""The token permutation of an MoE layer: each routed token's hidden vector copied into expert
order before the expert GEMMs and back, with the routing-probability multiply, after them.

Megatron-Core's all-to-all dispatcher (``megatron/core/transformer/moe/token_dispatcher.py``,
``MoEAlltoAllTokenDispatcher.token_permutation`` / ``token_unpermutation``, at core_v0.11.0
aa6207e2 and core_v0.12.0 d580efc6, the Megatron-Core of the NeMo 25.02 and 25.04 containers)
runs ``permute`` before the dispatch all-to-all and ``unpermute`` (with the probabilities) after
the combine all-to-all, on the rank's own (sequence-parallel) tokens. Both live in
``megatron/core/transformer/moe/moe_utils.py``; ``config.moe_permute_fusion`` (default False in
``transformer_config.py`` at both tags) picks Transformer Engine's fused kernels instead. Which
of the two a run uses is the fusion group ``moe_permute`` of the profile or the job (a job fact,
like the other fusion groups), not a branch here. The per-expert chunk sort that follows the
all-to-all when a rank holds more than one expert (``sort_chunks_by_idxs``) is not counted.

Elements per token of the activation dtype, h the hidden size, k the routed experts per token
(the probabilities, k per token, and the index tensors are negligible and left out):

* unfused (``moe_utils.permute`` / ``unpermute``, ``fused=False``, no token drop): ``permute``
  is ``tokens.index_select(0, sorted_indices)``, read k h and write k h; ``unpermute``
  multiplies the expert output by the permuted probabilities (read k h, write k h), writes a
  zero [T, h] output (h) and ``scatter_add_``\\s into it (read k h, read and write the output,
  2 h): 5 k h + 3 h.
* fused (Transformer Engine v2.1 450146ae, ``pytorch/permutation.py`` ``moe_permute`` /
  ``moe_unpermute`` with ``map_type='mask'``, ``pytorch/triton/permutation.py``
  ``_permute_kernel`` / ``_unpermute_kernel``): the permute kernel loads each token once and
  stores it to its k destinations (h + k h); the unpermute kernel loads the k copies, weights
  and accumulates them in registers, stores the token once (k h + h): 2 k h + 2 h.

Kept for backward: the probability multiply keeps the expert output [T k, h] for the
probabilities' gradient (unfused: the autograd ``mul`` saves both operands; fused:
``_moe_unpermute_mask_map.forward`` ``ctx.save_for_backward(inp, row_id_map, merging_probs)``)
-- 2 k h bytes at 2-byte activations, in the activation dtype also under FP8 (the expert's
output GEMM writes it in BF16). ``index_select`` / ``_moe_permute_mask_map`` keep only indices.
"""

from __future__ import annotations


def permute_kept_bytes(hidden, top_k) -> float:
    """Bytes per token (at 2-byte activations) the un-permutation keeps for backward: the
    expert output's k copies (module docstring)."""
    return 2.0 * top_k * hidden


def permute_io_fused(hidden, top_k) -> float:
    """Elements per token Transformer Engine's fused permute and unpermute kernels read and
    write in one forward: 2 k h + 2 h (module docstring)."""
    return 2.0 * top_k * hidden + 2.0 * hidden


def permute_io_unfused(hidden, top_k) -> float:
    """Elements per token Megatron-Core's unfused ``permute`` and ``unpermute`` read and write
    in one forward: 5 k h + 3 h (module docstring)."""
    return 5.0 * top_k * hidden + 3.0 * hidden
