"""Workload spec: what is trained on the model, with which numerics."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PositiveInt, field_validator, model_validator

from trainplan.conventions import (AttentionKernel, BaseWeights, CpCollective, Fp8Recipe,
                                  FusionGroup, Optimizer, Precision, base_weight_bytes,
                                  canonical_precision, lora_targets)
from trainplan.spec.base import Spec

#: a precision field that reads other tools' names (conventions.PRECISION_ALIASES): Job's and
#: the audit claims' (conventions stays free of pydantic: the CLI imports it at start-up)
PrecisionName = Annotated[Precision, BeforeValidator(canonical_precision)]


class Job(Spec):
    """Sequence length, batch, data amount, precision, optimizer, trainable parts.

    Give the global batch as ``global_batch`` (sequences) or ``global_batch_tokens``; the data
    amount as ``tokens`` or as ``samples`` x ``epochs`` (samples are sequences of ``seq_len``
    tokens unless the multimodal fields say otherwise).
    """

    seq_len: PositiveInt = Field(default=4096, description="tokens per sequence (context length trained at)")
    global_batch: PositiveInt | None = Field(default=None, description="sequences per optimizer step")
    global_batch_tokens: PositiveInt | None = Field(default=None, description="tokens per optimizer step")
    tokens: float | None = Field(default=None, gt=0, description="total training tokens")
    samples: float | None = Field(default=None, gt=0, description="unique samples per epoch")
    epochs: float = Field(default=1.0, gt=0, description="passes over `samples` (ignored when `tokens` is given)")
    precision: PrecisionName = Field(default="bf16_mixed", description="numeric format: weights/activations and the optimizer's master copy (see `trainplan conventions`)")
    optimizer: Optimizer = Field(default="adamw", description="optimizer; sets the bytes of optimizer state per parameter")
    grad_clip: float | None = Field(default=1.0, ge=0, description="gradient-norm clipping threshold (none: off; costs one norm per step)")
    trainable: Literal["full", "lora"] = Field(default="full", description="full fine-tune / pre-train, or LoRA adapters on a frozen base")
    frozen: tuple[str, ...] = Field(default=(), description="stack or projector names kept frozen")
    trained_in_full: tuple[str, ...] = Field(
        default=(), description="with trainable = lora: vision towers or projectors trained in full "
        "beside the adapters (LLaVA's LoRA recipe trains the projector: ['projector'])")
    lora_rank: int = Field(default=16, ge=1, le=65536, description="LoRA rank r (trainable = \"lora\")")
    lora_targets: tuple[str, ...] | None = Field(
        default=None, description="the projections LoRA adapts (trainable = \"lora\"): "
        "\"attention\" (q, k, v, o), \"all-linear\" (q, k, v, o, gate, up, down: PEFT's "
        "target_modules=\"all-linear\") or a list of projections (q, k, v, o, gate, up, down, "
        "or module names such as q_proj, linear_qkv, linear_fc1); none: the framework's default "
        "(`lora_targets` in its profile)")
    base_weights: BaseWeights | None = Field(
        default=None, description="the frozen decoder's Linear weights stored by bitsandbytes: "
        "nf4 (QLoRA, Dettmers et al. 2023: with trainable = lora) or fp4 in 4 bits, int8 "
        "(LLM.int8(), Linear8bitLt) in 8 bits; embeddings, norms and the LM head stay in the "
        "compute dtype, and each weight is dequantized to it for its GEMM; none: the compute "
        "dtype (a LoRA base is held in it, as PEFT and torchtune load it)")
    double_quant: bool = Field(
        default=True, description="with base_weights: quantize the quantization constants too "
        "(bnb_4bit_use_double_quant; 0.127 instead of 0.5 bit per parameter)")
    headroom_gib: float | None = Field(
        default=None, ge=0, le=1e5, description="GiB per GPU kept free beyond the predicted "
        "peak, for allocator fragmentation and memory outside PyTorch (CUDA context, NCCL): "
        "plan never picks a layout inside it, estimate says when one is; none: the default, "
        "7% of the GPU's memory + 1 GiB less the framework's own fixed_gib "
        "(conventions.default_headroom_gib, derived in benchmarks/headroom.py)")
    dropout: bool = Field(default=False, description="dropout in attention and MLP (GPT-style); masks are kept")
    framework: str = Field(
        default="megatron", description="training framework profile (`trainplan frameworks`): megatron, "
        "torchtitan, fsdp, deepspeed, pytorch (DDP / HF Trainer), analytic; aliases accepted; "
        "none: megatron, or pytorch (Hugging Face Trainer with PEFT) for trainable = lora, "
        "since Megatron-LM's pre-training script has no LoRA")
    fused_ops: tuple[FusionGroup, ...] | None = Field(
        default=None, description="elementwise op groups your model code runs as fused kernels (e.g. "
        "flash-attn's fused RMSNorm, rotary, SwiGLU and cross-entropy; softmax: eager attention's "
        "scale, mask and softmax as one kernel; linear_cross_entropy: the LM head and the loss "
        "in chunks that never hold the whole logits, as Liger-Kernel's fused linear "
        "cross-entropy; moe_permute: an MoE layer's token permutation in Transformer Engine's "
        "fused kernels, Megatron-Core --moe-permute-fusion); none: the framework's")
    attention_kernel: AttentionKernel | None = Field(
        default=None, description="the fused attention kernel: fa1 (FlashAttention-1, flash-attn "
        "1.x; A100 only), fa2 (FlashAttention-2 or a kernel of its efficiency), fa3 (FlashAttention-3, Hopper GPUs only) or cudnn (cuDNN fused attention, "
        "Transformer Engine's FusedAttention; timed at FlashAttention-2's rate where the GPU has "
        "no cuDNN figure); none: the framework's (Megatron and torchtitan: cudnn, others: fa2)")
    unfused_ops: tuple[FusionGroup, ...] | None = Field(
        default=None, description="elementwise op groups the framework profile fuses but your run does "
        "not (e.g. cross_entropy for Megatron-LM without --cross-entropy-loss-fusion, its default "
        "in megatron/training/arguments.py); none: the framework's")
    fp8_recipe: Fp8Recipe | None = Field(
        default=None, description="FP8 scaling recipe (precision fp8_mixed): delayed (per-tensor scales "
        "from an amax history, Transformer Engine DelayedScaling), current (per-tensor scales "
        "from the tensor itself, Float8CurrentScaling; Megatron fp8_recipe 'tensorwise') or "
        "mxfp8 (one scale per 32 values, Blackwell GPUs only); none: the framework's default")
    cp_comm_type: CpCollective | None = Field(
        default=None, description="how context parallelism exchanges K and V: ring (passed round the "
        "CP ranks beside the attention; Megatron --cp-comm-type p2p), all_gather (gathered "
        "before the attention, their gradients reduce-scattered after it; Megatron allgather, "
        "torchtitan) or all_to_all (Q, K, V and the output re-split between sequence and heads; "
        "Megatron a2a, DeepSpeed-Ulysses); none: the framework's")
    tp_comm_overlap: bool | None = Field(
        default=None, description="tensor-parallel communication overlapped with the GEMMs it feeds "
        "(Megatron --tp-comm-overlap, Transformer Engine userbuffers); none: the framework's "
        "default")
    compile: bool = Field(default=False, description="torch.compile on (fuses elementwise ops where the "
                          "framework profile says so)")
    main_grads_fp32: bool | None = Field(
        default=None, description="accumulate and reduce gradients in fp32 (Megatron "
        "--accumulate-allreduce-grads-in-fp32 / ddp.grad_reduce_in_fp32, FSDP reduce_dtype); "
        "none: the framework's default")
    zero3_max_reuse_params: float | None = Field(
        default=None, ge=0, description="DeepSpeed ZeRO-3 stage3_max_reuse_distance in parameters: "
        "gathered weights used again within it stay gathered (with recompute, larger layers are "
        "gathered a third time for the backward); none: the framework's default; ignored by "
        "frameworks without it")
    zero3_max_live_params: float | None = Field(
        default=None, ge=0, description="DeepSpeed ZeRO-3 stage3_max_live_parameters: no prefetch "
        "while this many parameters are gathered; none: the framework's default; ignored by "
        "frameworks without it")
    logits_fp32: bool | None = Field(
        default=None, description="the loss keeps an fp32 copy of the logits for their gradient "
        "(Megatron-Core's vocab-parallel cross-entropy, native or fused; transformers' "
        "ForCausalLMLoss); false: it works in the logits' own dtype and writes their gradient in "
        "place (Transformer Engine parallel_cross_entropy, Megatron cross_entropy_fusion_impl "
        "'te', Megatron-Bridge's performance recipes; flash-attn's CrossEntropyLoss); none: the "
        "framework's; the pytorch profile (transformers' loss) takes only true")
    adamw_impl: Literal["foreach", "fused"] | None = Field(
        default=None, description="AdamW implementation: foreach allocates a moment-sized temporary "
        "at the step, fused none (torch.optim.AdamW); none: the framework's default")
    # multimodal workload (used when the model has vision stacks)
    images_per_sample: float | None = Field(
        default=None, ge=0, description="images per sample; none: 1 for a model with a vision tower, "
        "else 0")
    image_size: int | None = Field(default=None, gt=0, description="image side in pixels (default: tower's)")
    min_pixels: int | None = Field(
        default=None, gt=0, description="dynamic-resolution towers (Qwen2-VL, Qwen2.5-VL): the "
        "processor's min_pixels, the least area smart_resize scales an image up to; none: "
        "3,136 (56 x 56, the checkpoints' preprocessor_config.json)")
    max_pixels: int | None = Field(
        default=None, gt=0, description="dynamic-resolution towers: the processor's max_pixels, "
        "the most area smart_resize keeps; none: 12,845,056 (the checkpoints' "
        "preprocessor_config.json; transformers' Qwen2VLImageProcessor class default is "
        "1,003,520 = 28 x 28 x 1280)")
    text_tokens: float | None = Field(default=None, gt=0, description="text tokens per sample")
    image_resolutions: tuple[tuple[float, float, float], ...] = Field(
        default=(), description="the dataset's image sizes: (height, width, weight) rows in pixels, "
        "weight the share of images (a missing weight is 1); dynamic-resolution towers "
        "(Qwen2-VL) take each size, tiling towers (InternVL, LLaVA-OneVision) cut it into "
        "crops, fixed-resolution towers resize it to their side")
    loader_images_per_s: float | None = Field(default=None, gt=0, description="measured decode rate "
                                              "per loader worker (trainplan data loader-bench)")
    loader_workers: int | None = Field(default=None, ge=1, description="loader workers per GPU")
    packing_efficiency: float = Field(default=1.0, gt=0, le=1.0,
                                      description="useful tokens / processed tokens")
    document_tokens: float | None = Field(
        default=None, ge=1, description="packed sequences whose documents attend only to themselves "
        "(a document mask: flash-attn's varlen kernels, Transformer Engine's THD format, flex "
        "attention's block mask): the documents' E(d^2)/E(d) in tokens, their length when all are "
        "alike (`trainplan data lengths` prints it); fused attention kernels then skip the other "
        "documents' keys, eager attention still computes the whole sequence's scores. None: "
        "attention spans the whole sequence (Megatron-LM without --reset-attention-mask)")

    @model_validator(mode="before")
    @classmethod
    def _framework(cls, data: Any) -> Any:
        """``implementation`` (v0.1) folds into ``framework``; names resolve to catalog ids."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        impl = data.pop("implementation", None)
        if impl is not None:
            if data.get("framework") not in (None, impl):
                raise ValueError(f"give framework ({data['framework']!r}) or implementation "
                                 f"({impl!r}), not both")
            data["framework"] = impl
        if data.get("framework") is None and data.get("trainable") == "lora":
            # a LoRA job runs on a fine-tuning stack: Megatron-LM's pretrain_gpt.py has no
            # adapters; the Hugging Face Trainer with PEFT is the common one
            data["framework"] = "pytorch"
        if isinstance(data.get("framework"), str):
            from trainplan.spec.framework import get_framework
            data["framework"] = get_framework(data["framework"]).id
        return data

    @property
    def lora_projections(self) -> tuple[str, ...]:
        """The projections LoRA adapts: ``lora_targets``, else the framework profile's."""
        if self.lora_targets is not None:
            return self.lora_targets
        from trainplan.spec.framework import get_framework
        return get_framework(self.framework).lora_targets

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> Any:
        """A set's name or projection/module names -> the projections (conventions.lora_targets)."""
        return None if v is None else lora_targets(v)

    @field_validator("image_resolutions", mode="before")
    @classmethod
    def _resolutions(cls, v: Any) -> Any:
        """(height, width) rows weigh 1; every height, width and weight must be > 0."""
        if not isinstance(v, (list, tuple)):
            return v
        rows = [(tuple(r) + ((1.0,) if len(r) == 2 else ())) if isinstance(r, (list, tuple))
                else r for r in v]
        for i, r in enumerate(rows):
            if isinstance(r, tuple) and len(r) == 3 and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in r) \
                    and not all(x > 0 for x in r):
                raise ValueError(f"row {i} = {list(r)}: height, width and weight must be > 0")
        return rows

    @property
    def implementation(self) -> str:
        """The framework id (the v0.1 name of this field)."""
        return self.framework

    @model_validator(mode="before")
    @classmethod
    def _batch(cls, data: Any) -> Any:
        """The global batch in sequences: given, or global_batch_tokens / seq_len when that
        divides, or 1024 when neither is given (checked again after validation)."""
        if not isinstance(data, dict):
            return data
        gb: Any = data.get("global_batch")
        gbt: Any = data.get("global_batch_tokens")
        if gb is None and gbt is None:
            return {**data, "global_batch": 1024}
        if gb is None:
            try:
                tokens, seq = int(gbt), int(data.get("seq_len", 4096))
            except (TypeError, ValueError, OverflowError):
                return data                    # the field validators name the bad value
            if float(gbt) == tokens and tokens > 0 and seq > 0 and tokens % seq == 0:
                return {**data, "global_batch": tokens // seq}
        return data

    @model_validator(mode="after")
    def _check(self) -> "Job":
        if self.global_batch is not None and self.global_batch_tokens is not None:
            if self.global_batch * self.seq_len != self.global_batch_tokens:
                raise ValueError("give global_batch or global_batch_tokens, not both")
        both = set(self.fused_ops or ()) & set(self.unfused_ops or ())
        if both:
            raise ValueError(f"op groups {sorted(both)} are in both fused_ops and unfused_ops")
        if self.global_batch is None:
            raise ValueError(
                f"global_batch_tokens ({self.global_batch_tokens}) must be a multiple of "
                f"seq_len ({self.seq_len})")
        if self.document_tokens is not None and self.document_tokens > self.seq_len:
            raise ValueError(f"document_tokens ({self.document_tokens:g}) must be at most seq_len "
                             f"({self.seq_len}): a packed document is cut at the sequence's end")
        return self

    @property
    def attention_span(self) -> float:
        """Keys a query can attend to at most, for a fused attention kernel: the sequence, or
        with a document mask the documents' E[d^2]/E[d] (``document_tokens``). Causal attention
        over documents of lengths d_i gives sum d_i (d_i + 1) / 2 query-key pairs for sum d_i
        queries, (E[d^2]/E[d] + 1) / 2 keys per query: the (s + 1) / 2 of one sequence with s
        replaced by E[d^2]/E[d] (equal lengths: d); bidirectional, E[d^2]/E[d] for s."""
        return float(self.seq_len if self.document_tokens is None else self.document_tokens)

    def images_for(self, model) -> float:
        """Images per sample for ``model``: the job's, else one per sample for a VLM."""
        if self.images_per_sample is not None:
            return float(self.images_per_sample)
        return 1.0 if model.vision else 0.0

    @property
    def useful_batch_tokens(self) -> float:
        """Tokens per step that are data, not padding: batch tokens x packing efficiency."""
        return self.batch_tokens * self.packing_efficiency

    @property
    def base_weight_bytes(self) -> float:
        """Bytes per parameter of a quantized base's weights with their constants
        (``conventions.base_weight_bytes``; an 8-bit base's row scales at rows of 4096: the
        time model's figure); 0 without one. Memory uses :meth:`base_weight_bytes_at`."""
        return base_weight_bytes(self.base_weights, self.double_quant)

    def base_weight_bytes_at(self, hidden: int) -> float:
        """:attr:`base_weight_bytes` for a decoder of width ``hidden`` (an 8-bit base's fp32
        row scale per ``hidden`` weights)."""
        return base_weight_bytes(self.base_weights, self.double_quant, hidden)

    @property
    def batch_sequences(self) -> int:
        return int(self.global_batch)  # type: ignore[arg-type]

    @property
    def batch_tokens(self) -> int:
        return self.batch_sequences * self.seq_len

    def sample_tokens(self, image_tokens: float = 0.0, images: float | None = None) -> float | None:
        """Decoder tokens of one sample: ``text_tokens`` + images x ``image_tokens`` (the decoder
        tokens of one image; ``images``: the job's ``images_per_sample`` unless given, a VLM's
        default 1 comes from ``images_for``); None without a text length."""
        if self.text_tokens is None:
            return None
        n = self.images_per_sample if images is None else images
        return self.text_tokens + (n or 0.0) * image_tokens

    def total_tokens(self, image_tokens: float = 0.0, images: float | None = None) -> float | None:
        """Useful training tokens: ``tokens`` if given; else samples x epochs x tokens per sample
        -- :meth:`sample_tokens` when the text length is given, else a sequence filled to the
        packing efficiency. Steps are these over the useful tokens of a step
        (``useful_batch_tokens``)."""
        if self.tokens is not None:
            return float(self.tokens)
        if self.samples is not None:
            per = self.sample_tokens(image_tokens, images)
            if per is None:
                per = self.seq_len * self.packing_efficiency
            return self.samples * self.epochs * per
        return None
