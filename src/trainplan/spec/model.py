"""Model architecture spec: one or more transformer stacks joined by projectors.

A stack is exact enough to count every parameter (see ``trainplan.costmodel.params``).
The language decoder is the stack with ``role == "decoder"``; vision encoders have
``role == "vision"`` and feed the decoder through a projector.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from trainplan.spec.base import Spec


class MoE(Spec):
    """Mixture-of-experts feed-forward layers (Mixtral, DeepSeek-V3 style)."""

    num_experts: PositiveInt = Field(description="routed experts per MoE layer")
    top_k: PositiveInt = Field(description="routed experts each token is sent to")
    expert_ffn_hidden: PositiveInt = Field(description="FFN hidden size of one expert")
    shared_experts: int = Field(default=0, ge=0, description="always-active shared experts (DeepSeek)")
    dense_layers: int = Field(default=0, ge=0, description="first k layers that keep a dense FFN")
    router_bias: bool = Field(default=False, description="bias on the router projection")
    shared_expert_ffn_hidden: int = Field(default=0, ge=0, description="FFN hidden size of one shared expert (0: expert_ffn_hidden; Qwen2-MoE: shared_expert_intermediate_size)")
    shared_expert_gate: bool = Field(default=False, description="a sigmoid gate h->1 on the shared expert output (Qwen2-MoE shared_expert_gate)")
    # How tokens are routed: what a launch file must set to train the same router; none of it
    # changes parameters or FLOPs (DeepSeek-V3's expert bias is a buffer, not a parameter:
    # transformers modeling_deepseek_v3.py e_score_correction_bias = nn.Buffer)
    router_score: Literal["softmax", "sigmoid"] = Field(default="softmax", description="router score function: softmax (Mixtral, Qwen, DeepSeek-V2) or sigmoid (DeepSeek-V3 scoring_func)")
    router_norm_topk: bool = Field(default=True, description="the top-k weights are renormalised to sum to 1 (Mixtral always; Qwen/DeepSeek-V3 norm_topk_prob)")
    router_scaling: float = Field(default=1.0, gt=0, description="factor on the top-k weights (DeepSeek routed_scaling_factor: V3 2.5)")
    router_expert_bias: bool = Field(default=False, description="aux-loss-free balancing: a per-expert bias added to the scores for the choice only (DeepSeek-V3 noaux_tc, e_score_correction_bias)")
    router_groups: int = Field(default=1, ge=1, description="expert groups of group-limited routing (DeepSeek n_group)")
    router_group_topk: int = Field(default=0, ge=0, description="groups a token may pick its experts from (DeepSeek topk_group; 0: no group-limited routing)")
    router_aux_loss_coef: float | None = Field(default=None, ge=0, description="load-balancing loss coefficient the config records (router_aux_loss_coef; DeepSeek-V2 aux_loss_alpha); none: not recorded")
    router_seq_aux: bool = Field(default=False, description="the balancing loss is computed per sequence (DeepSeek-V2 seq_aux)")
    expert_bias: bool = Field(default=False, description="biases on every expert's matrices (gpt-oss GptOssExperts gate_up_proj_bias, down_proj_bias)")
    score_bias_param: bool = Field(default=False, description="the per-expert score-correction bias is a parameter of E (ERNIE 4.5 moe_statics.e_score_correction_bias), not a buffer")

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= num_experts ({self.num_experts})")
        if self.router_group_topk and (self.router_group_topk > self.router_groups
                                       or self.num_experts % self.router_groups):
            raise ValueError(f"router_group_topk ({self.router_group_topk}) must be <= "
                             f"router_groups ({self.router_groups}), which must divide "
                             f"num_experts ({self.num_experts})")
        return self


class MLA(Spec):
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 sec. 2.1; HF
    ``modeling_deepseek_v3.py`` ``DeepseekV3Attention``): queries through an optional low-rank
    bottleneck, keys and values decompressed from one shared latent plus a shared RoPE key."""

    q_lora_rank: int = Field(default=0, ge=0, description="query compression rank (0: a full q_proj, DeepSeek-V2-Lite)")
    kv_lora_rank: PositiveInt = Field(description="rank of the compressed KV latent (the cached vector)")
    qk_rope_head_dim: PositiveInt = Field(description="per-head query / shared key dims carrying RoPE")
    qk_nope_head_dim: PositiveInt = Field(description="per-head query/key dims without RoPE")
    v_head_dim: PositiveInt = Field(description="per-head value dims")


class Mixer(Spec):
    """A token mixer that replaces attention in ``layers`` of a stack's layers (or runs beside it
    in every layer with ``parallel``): a linear-attention or state-space layer with a fixed-size
    recurrent state instead of a KV cache (:mod:`trainplan.costmodel.mixers` counts it).

    kinds: ``gated_deltanet`` (Yang, Kautz, Hatamizadeh 2024, arXiv:2412.06464; transformers
    ``modeling_qwen3_next.py`` ``Qwen3NextGatedDeltaNet``) and ``mamba2`` (Mamba-2's SSD layer,
    Dao & Gu 2024, arXiv:2405.21060; transformers ``modeling_mamba2.py`` ``Mamba2Mixer``, the same
    layer in Bamba and Falcon-H1)."""

    kind: Literal["gated_deltanet", "mamba2"] = Field(description="gated_deltanet or mamba2")
    layers: int = Field(ge=0, description="layers whose token mixer this is (the rest use attention)")
    parallel: bool = Field(default=False, description="runs beside attention in every layer, outputs summed (Falcon-H1); then layers must equal the stack's")
    heads: PositiveInt = Field(description="value heads (gated_deltanet linear_num_value_heads; mamba2 num_heads)")
    head_dim: PositiveInt = Field(description="value head width (gated_deltanet linear_value_head_dim; mamba2 head_dim)")
    key_heads: int = Field(default=0, ge=0, description="gated_deltanet query/key heads (linear_num_key_heads)")
    key_head_dim: int = Field(default=0, ge=0, description="gated_deltanet query/key head width (linear_key_head_dim)")
    state: int = Field(default=0, ge=0, description="mamba2 state size N per group (state_size)")
    groups: int = Field(default=1, ge=1, description="mamba2 B/C groups (n_groups)")
    conv_kernel: PositiveInt = Field(default=4, description="causal depthwise conv1d width")
    conv_bias: bool = Field(default=False, description="bias on the conv1d (mamba2 use_conv_bias)")
    proj_bias: bool = Field(default=False, description="biases on in_proj and out_proj (mamba2 use_bias)")
    gated_norm: bool = Field(default=True, description="the gated RMSNorm before out_proj (Falcon-H1 mamba_rms_norm)")
    chunk: PositiveInt = Field(default=64, description="chunk length of the chunked scan (gated_deltanet 64; mamba2 chunk_size)")

    @model_validator(mode="after")
    def _check(self) -> "Mixer":
        if self.kind == "gated_deltanet" and not (self.key_heads and self.key_head_dim):
            raise ValueError("a gated_deltanet mixer needs key_heads and key_head_dim > 0")
        if self.kind == "gated_deltanet" and self.heads % self.key_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of key_heads "
                             f"({self.key_heads})")
        if self.kind == "mamba2" and (not self.state or self.heads % self.groups):
            raise ValueError("a mamba2 mixer needs state > 0 and groups dividing heads")
        return self


class Stack(Spec):
    """One transformer stack (a decoder LM or a vision encoder)."""

    name: str = Field(default="decoder", description="stack name; `job.frozen` and projectors refer to it")
    role: Literal["decoder", "vision"] = Field(default="decoder", description="decoder: the language model (exactly one); vision: an image encoder")
    layers: PositiveInt = Field(description="transformer blocks")
    hidden: PositiveInt = Field(description="model width (d_model)")
    heads: PositiveInt = Field(description="attention (query) heads")
    kv_heads: PositiveInt | None = Field(default=None, description="KV heads (GQA/MQA); default = heads")
    head_dim: PositiveInt | None = Field(default=None, description="default = hidden // heads")
    ffn_hidden: PositiveInt = Field(description="FFN inner size (per gate for SwiGLU; dense layers of an MoE stack)")
    mlp: Literal["swiglu", "gelu", "relu2"] = Field(
        default="swiglu", description="FFN kind: swiglu (3 matrices), gelu (2) or relu2, squared ReLU (2; Nemotron)")
    attn_bias: bool = Field(default=False, description="bias on q/k/v projections (Qwen2: True)")
    attn_out_bias: bool = Field(default=False, description="bias on the attention output projection")
    mlp_bias: bool = Field(default=False, description="biases on the FFN matrices")
    norm: Literal["rmsnorm", "layernorm"] = Field(default="rmsnorm", description="normalisation (layernorm has a bias)")
    vocab: int = Field(default=0, ge=0, description="vocabulary size (0 for a vision encoder)")
    tied_embeddings: bool = Field(default=False, description="LM head shares the input embedding matrix")
    position: Literal["rope", "learned", "none"] = Field(default="rope", description="position encoding; learned adds a max_positions x hidden table")
    max_positions: int = Field(default=0, ge=0, description="learned position table size")
    context_length: int = Field(default=0, ge=0, description="trained context (config max_position_embeddings; 0: not given); informational")
    final_norm: bool = Field(default=True, description="a norm after the last block")
    causal: bool = Field(default=True, description="causal attention mask (halves attention FLOPs); false for encoders")
    moe: MoE | None = Field(default=None, description="mixture-of-experts FFN (table `moe`); none: dense")
    mla: MLA | None = Field(default=None, description="multi-head latent attention (table `mla`, DeepSeek-V2/V3); none: MHA/GQA/MQA")
    qk_norm: Literal["none", "head", "full"] = Field(default="none", description="RMSNorm on queries and keys: per head_dim (Qwen3, Gemma 3) or over all heads (OLMo 2)")
    norms_per_layer: Literal[1, 2, 4] = Field(default=2, description="norms per block: 2, 4 with Gemma 2/3's extra post-attention and post-FFN norms, or 1 where attention and FFN run in parallel from one norm (Cohere, Falcon-7B)")
    act_params: int = Field(default=0, ge=0, description="learned scalars of each layer's activation (Apertus xIELU alpha_p, alpha_n: 2)")
    sliding_window: int = Field(default=0, ge=0, description="keys a sliding-window layer attends to (0: none)")
    sliding_layers: int = Field(default=0, ge=0, description="layers that use the sliding window (Mistral: all; Gemma 2: every other; Gemma 3: 5 of 6)")
    final_logit_softcap: float = Field(default=0.0, ge=0, description="tanh soft-capping of the LM logits (Gemma 2; 0: none); keeps one more logits tensor")
    attn_logit_softcap: float = Field(default=0.0, ge=0, description="tanh soft-capping of the attention scores (Gemma 2; 0: none); no FLOP or parameter change")
    attn_sinks: bool = Field(default=False, description="a learned sink logit per head joins each softmax (gpt-oss GptOssAttention.sinks; Xiao et al. 2023 arXiv:2309.17453)")
    attn_gate: bool = Field(default=False, description="a sigmoid output gate per query feature, from a q_proj twice as wide (Qwen3-Next attn_output_gate)")
    chunk_size: int = Field(default=0, ge=0, description="chunked local attention: a query attends to the keys of its own chunk only (Llama 4 attention_chunk_size; 0: none)")
    chunked_layers: int = Field(default=0, ge=0, description="layers using chunked attention (Llama 4: 3 of 4)")
    nope_layers: int = Field(default=0, ge=0, description="attention layers without RoPE (Llama 4 no_rope_layers, SmolLM3, Cohere 2 global layers); changes no parameter or FLOP")
    mixer: Mixer | None = Field(default=None, description="linear-attention / state-space token mixer of some layers (table `mixer`)")
    mtp_layers: int = Field(default=0, ge=0, description="multi-token-prediction modules in the checkpoint (DeepSeek-V3: 1); NOT counted in params or FLOPs (transformers does not build them)")
    # Vision-encoder fields (role == "vision"); ignored for decoders.
    image_size: int = Field(default=0, ge=0, description="input image side in pixels (vision)")
    patch_size: int = Field(default=0, ge=0, description="patch side in pixels (vision)")
    channels: int = Field(default=3, ge=1, description="image channels (vision)")
    class_token: bool = Field(default=False, description="a learned class token is prepended (CLIP ViT)")
    pre_norm: bool = Field(default=False, description="extra LayerNorm before the encoder (CLIP)")
    spatial_merge: int = Field(default=1, ge=1, description="patches merged per side (Qwen2-VL: 2)")
    temporal_patch: int = Field(default=1, ge=1, description="frames per patch (Qwen2-VL: 2)")
    patch_bias: bool = Field(default=False, description="bias on the patch embedding (SigLIP, InternViT: True; CLIP, Qwen2-VL: False)")
    position_entries: int = Field(default=0, ge=0, description="learned position-table rows of a vision stack; 0: one per patch of the image_size grid (+ class token)")
    layer_scale: bool = Field(default=False, description="per-channel layer-scale vectors after attention and MLP (InternViT lambda_1/lambda_2)")
    pool_head: bool = Field(default=False, description="SigLIP attention-pooling head (vision_use_head): probe, one MHA, LayerNorm, MLP")
    window: int = Field(default=0, ge=0, description="windowed attention: window side in patches (Qwen2.5-VL: 112 px / 14 = 8); 0: full attention")
    full_attention_layers: tuple[int, ...] = Field(default=(), description="layer indexes that keep full attention in a windowed tower (Qwen2.5-VL: 7, 15, 23, 31)")
    forward_only_layers: int = Field(default=0, ge=0, description="last layers whose output the VLM does not read (LLaVA vision_feature_layer -2: 1): they run forward but get no gradient")
    tiling: Literal["none", "internvl", "anyres"] = Field(default="none", description="how the processor cuts an image into tower crops of image_size: none (one resize), internvl (InternVL 2.5/3 dynamic tiles, 1..max_tiles, plus a thumbnail), anyres (LLaVA-OneVision grid crops plus the whole image)")
    max_tiles: int = Field(default=12, ge=1, description="InternVL dynamic tiling: most tiles per image (max_dynamic_patch)")

    @field_validator("name")
    @classmethod
    def _printable_name(cls, v: str) -> str:
        """A stack name is a label (job.frozen and projectors refer to it, launch files quote
        it): printable, no newline or other control character."""
        if not v.isprintable():
            raise ValueError(f"{v!r}: printable characters only (no newline or control "
                             "character)")
        return v

    @model_validator(mode="after")
    def _check_vision(self) -> "Stack":
        bad = [i for i in self.full_attention_layers if not 0 <= i < self.layers]
        if bad:
            raise ValueError(f"full_attention_layers {bad} are not layer indexes 0..{self.layers - 1}")
        if self.forward_only_layers >= self.layers and self.role == "vision":
            raise ValueError(f"forward_only_layers ({self.forward_only_layers}) must be < layers ({self.layers})")
        return self

    @property
    def n_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention (all but a non-parallel mixer's)."""
        m = self.mixer
        return self.layers - (m.layers if m and not m.parallel else 0)

    @model_validator(mode="after")
    def _check(self) -> "Stack":
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(
                f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); give head_dim")
        if self.role == "decoder" and self.vocab <= 0:
            raise ValueError("a decoder stack needs vocab > 0")
        if self.role == "vision" and (self.image_size <= 0 or self.patch_size <= 0):
            raise ValueError("a vision stack needs image_size > 0 and patch_size > 0")
        if self.sliding_layers > self.layers:
            raise ValueError(f"sliding_layers ({self.sliding_layers}) > layers ({self.layers})")
        if self.sliding_layers and not self.sliding_window:
            raise ValueError("sliding_layers > 0 needs sliding_window > 0")
        if self.chunked_layers and not self.chunk_size:
            raise ValueError("chunked_layers > 0 needs chunk_size > 0")
        if self.chunked_layers + self.sliding_layers > self.attention_layers:
            raise ValueError(f"chunked_layers ({self.chunked_layers}) + sliding_layers "
                             f"({self.sliding_layers}) > attention layers ({self.attention_layers})")
        if self.mixer and (self.mixer.layers > self.layers or (
                self.mixer.parallel and self.mixer.layers != self.layers)):
            raise ValueError(f"mixer.layers ({self.mixer.layers}) must be <= layers "
                             f"({self.layers}), and equal to it when parallel")
        if self.moe and self.moe.dense_layers > self.layers:
            raise ValueError(f"moe.dense_layers ({self.moe.dense_layers}) > layers ({self.layers})")
        return self


class Projector(Spec):
    """Connects a vision stack to the decoder.

    kinds: ``linear`` (one matrix), ``mlp2`` (Linear-GELU-Linear, LLaVA-1.5), ``resampler``
    (``queries`` learned queries + one cross-attention layer, Qwen-VL), ``merge_mlp`` (spatial
    merge of ``merge**2`` patches then a 2-layer MLP, Qwen2-VL), ``shuffle_mlp`` (pixel shuffle of
    ``merge**2`` patches, LayerNorm, Linear-GELU-Linear; InternVL), ``shuffle_linear`` (pixel
    shuffle then one matrix; Idefics3/SmolVLM), ``pool_linear`` (``merge`` x ``merge`` average
    pool, RMSNorm, one matrix; Gemma 3).
    """

    kind: Literal["linear", "mlp2", "resampler", "merge_mlp", "shuffle_mlp", "shuffle_linear",
                  "pool_linear"] = Field(default="mlp2", description="projector kind (see above)")
    in_dim: PositiveInt = Field(description="width of the vision stack it reads")
    out_dim: PositiveInt = Field(description="width of the decoder it feeds")
    hidden: int = Field(default=0, ge=0, description="MLP hidden size (default out_dim)")
    queries: int = Field(default=0, ge=0, description="learned queries (resampler)")
    heads: int = Field(default=0, ge=0, description="cross-attention heads (resampler)")
    merge: int = Field(default=1, ge=1, description="patches merged per side (merge_mlp, shuffle_*: pixel shuffle, pool_linear: average-pool kernel)")
    bias: bool = Field(default=True, description="biases on its matrices")
    norm: Literal["layernorm", "rmsnorm", "none"] = Field(default="layernorm", description="norm of merge_mlp (Qwen2-VL LayerNorm, Qwen2.5-VL RMSNorm) and shuffle_mlp")
    newline: bool = Field(default=False, description="a learned image-newline vector (out_dim) of the model (LLaVA-NeXT/OneVision image_newline)")


class Model(Spec):
    """A trainable model: stacks (at least one decoder) and projectors."""

    name: str = Field(description="display name")
    stacks: tuple[Stack, ...] = Field(description="the transformer stacks (`[[model.stacks]]`): one decoder, any vision encoders")
    projectors: tuple[Projector, ...] = Field(default=(), description="vision-to-decoder connectors (`[[model.projectors]]`)")
    source: str = Field(default="", description="where the shapes come from (a config.json, a paper)")

    @model_validator(mode="after")
    def _check(self) -> "Model":
        decoders = [s for s in self.stacks if s.role == "decoder"]
        if len(decoders) != 1:
            raise ValueError(f"a model needs exactly one decoder stack, got {len(decoders)}")
        return self

    @property
    def decoder(self) -> Stack:
        return next(s for s in self.stacks if s.role == "decoder")

    @property
    def vision(self) -> tuple[Stack, ...]:
        return tuple(s for s in self.stacks if s.role == "vision")
