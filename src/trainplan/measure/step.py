"""One training step under the memory tracker: forward, loss, backward, optimizer step.

The step is the plain PyTorch/transformers loop every tutorial writes::

    loss = model(**batch).loss        # under torch.autocast for bf16_mixed
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

Precisions (what the job's ``precision`` means here):

``fp32``        fp32 parameters, gradients and AdamW moments; no autocast.
``bf16_mixed``  fp32 parameters (they *are* the master weights), ``torch.autocast(bfloat16)`` around
                forward and loss, so the matmuls run in bf16 on copies of the weights that
                autocast makes and caches for the forward; gradients and moments in fp32.
                This is the torch.amp recipe (docs "Automatic Mixed Precision"), not Megatron's.
``bf16_pure``   parameters, gradients and moments in bf16 (``model.to(torch.bfloat16)``).

Recompute ``full`` is transformers' ``gradient_checkpointing_enable`` (non-reentrant
``torch.utils.checkpoint`` around each decoder layer); ``layers`` checkpoints only the first
``recompute_layers`` decoder layers (the same transformers switch, then each
``GradientCheckpointingLayer``'s ``gradient_checkpointing`` flag turned off above the k-th, as
Megatron's ``--recompute-method block`` picks the first k layers); ``none`` keeps everything.
``dropout=True`` trains with p = 0.1 wherever the family has dropout (GPT-2: ``attn_pdrop``,
``resid_pdrop``, ``embd_pdrop``; Llama: ``attention_dropout``), in train mode. Attention is
``eager`` (the explicit softmax(QK^T)V of ``modeling_llama.eager_attention_forward``) or ``sdpa``
(``torch.nn.functional.scaled_dot_product_attention``, whose kernel PyTorch chooses: on CPU the
flash-attention CPU kernel, ``_scaled_dot_product_flash_attention_for_cpu``, when there is no
mask; on CUDA FlashAttention-2 or memory-efficient attention).

AdamW runs ``foreach`` (the CUDA default: one temporary the size of the parameters,
``exp_avg_sq_sqrt`` in ``torch.optim.adam._multi_tensor_adam``), ``fused`` (one kernel, no
temporaries) or ``forloop`` (per-parameter, the CPU default).

The step is run ``steps`` times (default 2); the peak of the last step is reported, when the
optimizer states exist from the first step, as they do for the rest of training.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from typing import Any

from trainplan.errors import InputError
from trainplan.measure.build import build_model, make_batch, require_torch
from trainplan.measure.memtrace import MemTrace
from trainplan.spec.model import Model

PRECISIONS = ("fp32", "bf16_mixed", "bf16_pure")
RECOMPUTE = ("none", "full", "layers")
ATTENTION = ("eager", "sdpa")
OPTIMIZERS = ("foreach", "fused", "forloop")


@dataclass(frozen=True)
class StepConfig:
    seq_len: int = 256
    micro_batch: int = 1
    precision: str = "bf16_mixed"
    recompute: str = "none"
    attn: str = "sdpa"
    adamw: str = "foreach"
    steps: int = 2
    part: str = "all"                  # all | vision (the vision tower alone)
    images_per_sample: int = 1
    dropout: bool = False              # p = 0.1 where the family has dropout (build.py)
    recompute_layers: int = 0          # recompute="layers": the first k layers checkpointed
    grad_accum: int = 1                # micro-batches whose gradients accumulate before a step

    def check(self) -> None:
        for name, val, ok in [("job.precision", self.precision, PRECISIONS),
                              ("strategy.recompute", self.recompute, RECOMPUTE),
                              ("attention", self.attn, ATTENTION),
                              ("adamw", self.adamw, OPTIMIZERS),
                              ("part", self.part, ("all", "vision"))]:
            if val not in ok:
                raise InputError(name, val, "one of " + ", ".join(ok) + " for `measure`")
        if self.steps < 1:
            raise InputError("steps", self.steps, "at least 1")
        if self.grad_accum < 1:
            raise InputError("grad_accum", self.grad_accum, "at least 1")
        if self.recompute == "layers" and self.recompute_layers < 1:
            raise InputError("strategy.recompute_layers", self.recompute_layers,
                             "at least 1 with recompute='layers'")


#: Micro-batches traced when the job accumulates gradients: from the second micro-batch on, each
#: one runs on top of the gradient buffers the first left (``.grad`` is kept until ``zero_grad``,
#: torch.optim.Optimizer.zero_grad), so the third and later repeat the second's memory exactly.
TRACED_ACCUM = 2


def job_shape(job: Any, strategy: Any, given: dict[str, Any], ranks: int) -> tuple[int, int]:
    """(data-parallel ranks, micro-batches per optimizer step) of the job as one rank runs it:
    the ranks are the job's own (``strategy.dp``, else ``cluster.gpus`` / (tp x pp x cp)) when
    the job file gives them, else ``ranks`` (the processes this command runs); the micro-batches
    are global_batch / (micro_batch x ranks) when the job gives its global batch, else 1.
    ``given`` is the job file's tables as written (before defaults)."""
    g_job, g_cl, g_st = (given.get(k) or {} for k in ("job", "cluster", "strategy"))
    dp = ranks
    if g_st.get("dp") is not None:
        dp = int(strategy.dp)
    elif g_cl.get("gpus") is not None:
        dp = max(1, int(g_cl["gpus"]) // (strategy.tp * strategy.pp * strategy.cp))
    if g_job.get("global_batch") is None and g_job.get("global_batch_tokens") is None:
        return dp, 1
    mb, gb = strategy.micro_batch, int(job.global_batch)
    if gb % (mb * dp):
        raise InputError("job.global_batch", gb, f"a multiple of micro_batch x data-parallel ranks "
                         f"= {mb} x {dp} = {mb * dp} (each rank accumulates global_batch / "
                         "(micro_batch x ranks) micro-batches per step)")
    return dp, gb // (mb * dp)


@dataclass
class Measurement:
    """Peak live bytes of the last step, by category, and bookkeeping for the report."""

    config: dict[str, Any]
    fake: bool
    params: int
    peak: dict[str, Any]
    phases: dict[str, dict[str, Any]]
    first_step_peak: dict[str, Any]
    sdpa_kernels: list[str] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        return int(self.peak["total"])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dtype(torch, precision: str):
    return torch.bfloat16 if precision == "bf16_pure" else torch.float32


def _optimizer(torch, params, kind: str):
    kw = {"foreach": dict(foreach=True), "fused": dict(fused=True),
          "forloop": dict(foreach=False)}[kind]
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)


def _loss(out: Any) -> Any:
    loss = getattr(out, "loss", None)
    if loss is not None:
        return loss
    # a vision tower alone: a scalar from every output feature (as a projector would use them)
    return out.last_hidden_state.float().pow(2).mean()


@contextlib.contextmanager
def _no_packing_check(fake: bool):
    """Under FakeTensorMode transformers cannot read the position ids to see that the batch is
    not packed (``masking_utils.find_packed_sequence_indices`` returns a mask when the tensor is
    fake), so it would build an explicit causal mask that the real run skips (SDPA is called with
    ``is_causal=True``). Our batches are never packed: answer as the real run does."""
    if not fake:
        yield
        return
    import os

    try:
        import transformers.masking_utils as mu
    except ImportError:          # transformers < 4.53 has no masking_utils
        mu = None
    orig = getattr(mu, "find_packed_sequence_indices", None)
    if orig is not None:
        mu.find_packed_sequence_indices = lambda position_ids: None
    # value checks (LLaVA's image-token count) cannot read fake data; the real run checks them
    prev = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
    os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
    try:
        yield
    finally:
        if orig is not None:
            mu.find_packed_sequence_indices = orig
        if prev is None:
            os.environ.pop("TRANSFORMERS_DISABLE_TORCH_CHECK", None)
        else:
            os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = prev


@contextlib.contextmanager
def _dropout_as_on_cuda(torch):
    """Run ``F.dropout`` as ATen does on CUDA, on any device.

    ``at::dropout`` (``aten/src/ATen/native/Dropout.cpp``) calls the fused ``native_dropout``
    only when ``is_fused_kernel_acceptable`` (a CUDA/XPU tensor, 0 < p < 1); elsewhere it
    multiplies by a noise tensor in the input's dtype, which backward keeps. ``native_dropout``
    returns the output and a **bool** mask, and its backward keeps only the mask
    (``derivatives.yaml``: ``native_dropout_backward(grad, result1, scale)``). The planner
    predicts GPUs, so the step calls the same ATen operator the CUDA path calls (it has a CPU
    kernel); outside training or at p = 0 the call is unchanged."""
    import torch.nn.functional as F
    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0.0 < p < 1.0:
            return torch.native_dropout(input, p, True)[0]
        return orig(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = orig


@contextlib.contextmanager
def _grouped_experts_in_any_dtype(torch: Any):
    """transformers 5.x runs MoE experts through ``torch.nn.functional.grouped_mm`` (or
    ``torch._grouped_mm``), whose meta/fake kernel accepts bf16 operands only, so a fp32 or
    bf16_mixed (fp32 weights) MoE trace failed. Where the grouped kernel does not take the dtype,
    transformers' own fallback (``transformers::grouped_mm_fallback``, the custom op it uses
    under torch.compile for non-bf16 weights: ``integrations/moe.py``) runs instead: the same
    operands, output (tokens x top_k, width) in the weights' dtype and saved tensors as the
    grouped kernel, so the trace allocates what the grouped kernel would."""
    try:
        import transformers.integrations.moe as moe
    except ImportError:
        yield
        return
    orig = getattr(moe, "_can_use_grouped_mm", None)
    if orig is None:
        yield
        return

    def can_use(input: Any, weight: Any, offs: Any) -> bool:
        return weight.dtype == torch.bfloat16 and orig(input, weight, offs)

    moe._can_use_grouped_mm = can_use
    try:
        yield
    finally:
        moe._can_use_grouped_mm = orig


def _checkpoint_first_layers(hf: Any, k: int) -> None:
    """Keep transformers' checkpointing on the first ``k`` decoder layers only (each
    ``GradientCheckpointingLayer`` reads its own ``gradient_checkpointing`` flag,
    ``transformers/modeling_layers.py``)."""
    from transformers.modeling_layers import GradientCheckpointingLayer
    layers = [m for name, m in hf.named_modules()
              if isinstance(m, GradientCheckpointingLayer) and "vision" not in name]
    if k > len(layers):
        raise InputError("strategy.recompute_layers", k, f"at most the {len(layers)} layers")
    for m in layers[k:]:
        m.gradient_checkpointing = False


def measure_step_memory(model: Model, cfg: StepConfig, fake: bool = True,
                        device: str = "cpu") -> Measurement:
    """Build ``model``, run ``cfg.steps`` training steps under :class:`MemTrace`, report the
    peak of the last one. ``fake=True`` runs under ``FakeTensorMode`` (no memory allocated)."""
    cfg.check()
    torch = require_torch()
    fake_mode = None
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    torch.manual_seed(0)
    # SDPA on CUDA (FlashAttention-2 / memory-efficient kernels) applies attention dropout
    # inside the kernel and regenerates the mask from the Philox seed and offset in backward
    # (``_scaled_dot_product_flash_attention`` returns them); on CPU no fused kernel takes
    # dropout and the math fallback would materialise s x s tensors a GPU never holds. So with
    # SDPA off CUDA the attention-probability dropout is left out; the residual and embedding
    # dropouts are measured as they run.
    attn_p = None if (cfg.attn == "eager" or device.startswith("cuda")) else 0.0
    hf = build_model(model, cfg.seq_len, cfg.attn, cfg.part, _dtype(torch, cfg.precision),
                     fake_mode=fake_mode, dropout=cfg.dropout, device=device,
                     attn_dropout=attn_p)
    outer = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with outer, _no_packing_check(fake), _dropout_as_on_cuda(torch), \
            _grouped_experts_in_any_dtype(torch):
        if cfg.recompute in ("full", "layers"):
            hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.recompute == "layers":
            _checkpoint_first_layers(hf, cfg.recompute_layers)
        batch = make_batch(model, hf, cfg.seq_len, cfg.micro_batch, cfg.part,
                           cfg.images_per_sample)
        batch = {k: v.to(device) for k, v in batch.items()}
        if cfg.precision == "bf16_pure" and "pixel_values" in batch:
            batch["pixel_values"] = batch["pixel_values"].to(torch.bfloat16)
        opt = _optimizer(torch, [p for p in hf.parameters() if p.requires_grad], cfg.adamw)
        tr = MemTrace()
        tr.register_module(hf)
        tr.register(batch.values(), "inputs")
        autocast = (lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)) \
            if cfg.precision == "bf16_mixed" else contextlib.nullcontext
        first_peak: dict[str, Any] = {}
        with tr:
            for i in range(cfg.steps):
                if i == cfg.steps - 1:
                    if i > 0:
                        first_peak = tr.peak.as_dict()
                    tr.reset_peak()
                for _ in range(cfg.grad_accum):    # .grad accumulates until zero_grad
                    with tr.phase("forward"):
                        with autocast():
                            out = hf(**batch)
                            loss = _loss(out)
                        del out
                    end_fwd = tr.snapshot("end of forward")
                    with tr.phase("backward"):
                        loss.backward()
                    del loss
                with tr.phase("optimizer"):
                    opt.step()
                tr.adopt_optimizer(opt)
                with tr.phase("zero_grad"):
                    opt.zero_grad(set_to_none=True)
        if cfg.steps == 1:
            first_peak = tr.peak.as_dict()
        kernels = sorted(k for k in tr.ops_seen if "scaled_dot_product" in k or k == "_softmax")
        n_params = sum(p.numel() for p in hf.parameters())
    return Measurement(config=asdict(cfg), fake=fake, params=int(n_params),
                       peak=tr.peak.as_dict(),
                       phases={**{k: v.as_dict() for k, v in tr.phase_peaks.items()},
                               "end_forward": end_fwd.as_dict()},
                       first_step_peak=first_peak, sdpa_kernels=kernels)
