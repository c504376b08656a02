"""Count the GPU kernels eager PyTorch launches for one Hugging Face GPT-2 block, forward and
backward -- the counts behind the framework profiles' ``kernels_per_layer`` and
``backward_kernels_per_layer`` (catalog/data/frameworks.json).

Method (CPU only; kernel counts do not depend on the device, timings here are NOT used):
a tiny ``GPT2LMHeadModel`` (transformers, eager attention, train mode so dropout is on) runs a
forward and a backward under a ``TorchDispatchMode`` that counts every ATen op reaching the
backend, minus the ops that launch no kernel (views, ``empty*``, ``detach``, ``_unsafe_view``).
The per-block count is the difference between a 3-block and a 2-block model (embeddings, final
norm, LM head and loss cancel). Three substitutions make the CPU run take the op path CUDA
takes:

* dropout calls ``torch.native_dropout`` -- on CUDA ``aten::dropout`` is the fused
  ``native_dropout`` kernel (one forward, one backward kernel; aten/src/ATen/native/Dropout.cpp
  ``is_fused_kernel_acceptable``), on CPU it decomposes into bernoulli_, div_ and mul;
* the attention core runs the op sequence of transformers v4.12.0 ``GPT2Attention._attn`` (the
  version the DeepSpeedExamples autotuning runs used): matmul, divide by sqrt(d), causal mask
  buffer ``.bool()``, ``masked_bias.to(dtype)``, ``torch.where``, add the padding mask, softmax,
  dropout, matmul (later versions replaced the where/bool with one additive mask);
* ``--amp``: ``torch.autocast("cpu", float16)`` stands in for CUDA autocast: the matmuls
  (addmm, bmm) take fp16 copies of fp32 weights, biases and fp32 inputs, LayerNorm and softmax
  run in fp32 (the same op lists as CUDA autocast for these ops, torch/csrc/autograd/
  autocast_mode.cpp); the casts and their backward are counted.

Without ``--amp`` the count is DeepSpeed's fp16 engine (``module.half()``, no autocast; the same
op count as fp32). AccumulateGrad adds each parameter gradient into an existing ``.grad``
(one ``add_`` per parameter tensor, as with ``zero_grad(set_to_none=False)``, the default of
torch 1.9).

    python benchmarks/eager_kernel_counts.py          # needs torch and transformers
"""

from __future__ import annotations

import collections
import sys
import warnings

warnings.filterwarnings("ignore")

NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty_strided", "new_empty", "detach",
             "lift_fresh", "_local_scalar_dense", "_unsafe_view", "set_", "resize_"}


def _launches_kernel(func) -> bool:
    """False for ops that only make a view or metadata (aliasing outputs, not written)."""
    rets = func._schema.returns
    if rets and all(r.alias_info is not None and not r.alias_info.is_write for r in rets):
        return False
    return func._schema.name.split("::")[1] not in NO_KERNEL


def _attn_v4_12(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    """The op sequence of transformers v4.12.0 GPT2Attention._attn (see the module docstring)."""
    import torch
    w = torch.matmul(query, key.transpose(-1, -2))
    w = w / (float(value.size(-1)) ** 0.5)
    q_len, k_len = query.size(-2), key.size(-2)
    causal = module.tp_bias_u8[:, :, k_len - q_len:k_len, :k_len].bool()
    w = torch.where(causal, w, module.tp_masked_bias.to(w.dtype))
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.nn.functional.softmax(w, dim=-1)
    w = torch.nn.functional.dropout(w, p=dropout, training=module.training)
    out = torch.matmul(w.to(value.dtype), value)
    return out.transpose(1, 2), w


def count(n_layer: int, amp: bool):
    """Kernels of one forward and one backward of a tiny GPT-2 with ``n_layer`` blocks."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers.models.gpt2.modeling_gpt2 as mg

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if _launches_kernel(func):
                self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    def fused_dropout(x, p=0.5, training=True, inplace=False):
        return torch.native_dropout(x, p, training)[0] if training and p > 0 else x

    torch.nn.functional.dropout = fused_dropout
    mg.eager_attention_forward = _attn_v4_12
    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=n_layer, n_positions=64, vocab_size=128,
                     use_cache=False)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg).train()
    for blk in model.transformer.h:
        blk.attn.register_buffer("tp_bias_u8", torch.tril(torch.ones(64, 64, dtype=torch.uint8))
                                 .view(1, 1, 64, 64), persistent=False)
        blk.attn.register_buffer("tp_masked_bias", torch.tensor(-1e4), persistent=False)
    ids = torch.randint(0, 128, (2, 32))
    # a 4.12-style additive padding mask (run_clm passes attention_mask); made once per forward
    pad = torch.zeros(2, 1, 1, 32)

    def loss():
        with torch.autocast("cpu", dtype=torch.float16, enabled=amp):
            return model(input_ids=ids, attention_mask=pad, labels=ids, use_cache=False).loss

    loss().backward()          # gradients exist from here on: AccumulateGrad adds into them
    fwd, bwd = Count(), Count()
    with fwd:
        out = loss()
    with bwd:
        out.backward()
    return fwd.ops, bwd.ops


def per_block(amp: bool):
    f2, b2 = count(2, amp)
    f3, b3 = count(3, amp)
    return f3 - f2, b3 - b2


def main(argv) -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("needs torch and transformers (pip install trainplan[measure])")
        return
    for amp in (False, True):
        f, b = per_block(amp)
        label = "torch.amp fp16 autocast (HF Trainer --fp16, DDP)" if amp else \
            "fp16 module, no autocast (DeepSpeed fp16 engine)"
        nf, nb = sum(f.values()), sum(b.values())
        print(f"{label}: forward {nf} kernels, backward {nb} kernels per block "
              f"(backward/forward {nb / nf:.2f})")
        print("   forward ", dict(sorted(f.items())))
        print("   backward", dict(sorted(b.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
