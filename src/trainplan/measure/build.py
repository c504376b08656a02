"""trainplan Model -> transformers config -> a randomly initialised torch model.

The planner and the measurement start from the same :class:`trainplan.spec.model.Model`: a
decoder stack becomes a ``LlamaConfig`` (``Qwen2Config``/``Qwen3Config``/``MixtralConfig``/
``Qwen2MoeConfig`` when the stack says so) or a ``GPT2Config``; a vision stack becomes a
``CLIPVisionConfig``; a
vision stack + projector + decoder becomes a ``LlavaConfig``. Field names follow each family's
``configuration_*.py`` in transformers. Nothing is downloaded: weights are random.

Under ``fake=True`` the model is built inside ``FakeTensorMode`` (``torch._subclasses``): every
tensor has shape, dtype, device and storage size but no data, so a 70B model is built and
stepped on a laptop.
"""

from __future__ import annotations

from typing import Any

from trainplan.costmodel.vision_tokens import llm_tokens_per_image
from trainplan.errors import InputError, MissingExtraError
from trainplan.spec.model import Model, Stack


def require_torch() -> Any:
    """Import torch and transformers or raise MissingExtraError naming the ``torch`` extra."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingExtraError("torch", "torch", "Measuring") from None
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise MissingExtraError("transformers", "torch", "Measuring") from None
    return torch


def _decoder_config(dec: Stack, seq_len: int, attn: str, dropout: bool = False,
                    attn_dropout: float | None = None) -> Any:
    import transformers as tf
    p = 0.1 if dropout else 0.0
    pa = p if attn_dropout is None else attn_dropout
    if dec.mlp == "gelu" and dec.position == "learned":
        return tf.GPT2Config(
            vocab_size=dec.vocab, n_embd=dec.hidden, n_layer=dec.layers, n_head=dec.heads,
            n_inner=dec.ffn_hidden, n_positions=max(dec.max_positions, seq_len),
            resid_pdrop=p, embd_pdrop=p, attn_pdrop=pa,
            tie_word_embeddings=dec.tied_embeddings, activation_function="gelu_new",
            use_cache=False, attn_implementation=attn)
    if dec.mlp != "swiglu" or dec.norm != "rmsnorm" or dec.position != "rope":
        raise InputError("model.decoder", f"mlp={dec.mlp}, norm={dec.norm}, position={dec.position}",
                         "a Llama-style (swiglu, rmsnorm, rope) or GPT-2-style (gelu, layernorm, "
                         "learned positions) decoder: transformers has no matching model class here")
    if dec.attn_out_bias:
        raise InputError("model.decoder.attn_out_bias", True,
                         "False for the Llama/Qwen2/Mistral families built by `measure`")
    # parts the classes built here do not have: measuring without them would agree with a
    # prediction that leaves them out too, and prove nothing. Qwen3's per-head q/k RMSNorm is
    # built with transformers' Qwen3 class (dense, no bias).
    qwen3 = dec.qk_norm == "head" and dec.moe is None and not dec.attn_bias
    missing = {"qk_norm": dec.qk_norm != "none" and not qwen3,
               "norms_per_layer": dec.norms_per_layer != 2,
               "final_logit_softcap": dec.final_logit_softcap > 0, "mla": dec.mla is not None}
    for field, present in missing.items():
        if present:
            raise InputError(f"model.decoder.{field}", getattr(dec, field),
                             "absent for `measure`: it builds Llama, Qwen2, Qwen3 (dense), "
                             "Mixtral, Qwen2-MoE and GPT-2 classes, which have no such part (Gemma 2/3, "
                             "OLMo 2 and DeepSeek models are not measured)")
    common = dict(vocab_size=dec.vocab, hidden_size=dec.hidden, intermediate_size=dec.ffn_hidden,
                  num_hidden_layers=dec.layers, num_attention_heads=dec.heads,
                  num_key_value_heads=dec.n_kv, head_dim=dec.d_head,
                  max_position_embeddings=max(seq_len, 4096),
                  tie_word_embeddings=dec.tied_embeddings, use_cache=False,
                  attn_implementation=attn)
    if dec.moe is not None:
        m = dec.moe
        if m.shared_experts or m.dense_layers:
            # transformers' Qwen2-MoE: one gated shared expert (of shared_experts x the shared
            # expert's FFN, as DeepSeek's), the first layers dense (``mlp_only_layers``)
            if not (m.shared_experts and m.shared_expert_gate) or m.router_score != "softmax":
                raise InputError("model.decoder.moe", "dense layers or shared experts without "
                                 "a gated shared expert and a softmax router",
                                 "a Mixtral-style MoE, or Qwen2-MoE's gated shared expert and "
                                 "softmax router, for `measure`")
            shared = m.shared_experts * (m.shared_expert_ffn_hidden or m.expert_ffn_hidden)
            return tf.Qwen2MoeConfig(
                num_experts=m.num_experts, num_experts_per_tok=m.top_k,
                moe_intermediate_size=m.expert_ffn_hidden,
                shared_expert_intermediate_size=shared, norm_topk_prob=m.router_norm_topk,
                mlp_only_layers=list(range(m.dense_layers)), qkv_bias=dec.attn_bias,
                attention_dropout=pa, **common)
        return tf.MixtralConfig(num_local_experts=m.num_experts, num_experts_per_tok=m.top_k,
                                **{**common, "intermediate_size": m.expert_ffn_hidden})
    if qwen3:
        return tf.Qwen3Config(attention_bias=False, attention_dropout=pa, **common)
    if dec.attn_bias:
        return tf.Qwen2Config(attention_dropout=pa, **common)
    return tf.LlamaConfig(attention_bias=False, mlp_bias=dec.mlp_bias,
                          attention_dropout=pa, **common)


def _vision_config(v: Stack, attn: str) -> Any:
    import transformers as tf
    if v.norm != "layernorm" or v.mlp != "gelu":
        raise InputError(f"model.{v.name}", f"norm={v.norm}, mlp={v.mlp}",
                         "a CLIP-style vision tower (layernorm, gelu MLP) for `measure`")
    return tf.CLIPVisionConfig(
        hidden_size=v.hidden, intermediate_size=v.ffn_hidden, num_hidden_layers=v.layers,
        num_attention_heads=v.heads, image_size=v.image_size, patch_size=v.patch_size,
        num_channels=v.channels, hidden_act="quick_gelu", attn_implementation=attn)


def hf_config(model: Model, seq_len: int, attn: str = "sdpa", part: str = "all",
              dropout: bool = False, attn_dropout: float | None = None) -> Any:
    """The transformers config of ``model`` (``part``: all, decoder or vision). ``dropout``:
    p = 0.1 in every dropout of the decoder family (GPT-2: embedding, attention probabilities,
    residuals; Llama/Qwen2: attention probabilities); ``attn_dropout`` overrides the
    attention-probability p."""
    require_torch()
    if part == "vision":
        if not model.vision:
            raise InputError("model", model.name, "a model with a vision stack")
        return _vision_config(model.vision[0], attn)
    dec_cfg = _decoder_config(model.decoder, seq_len, attn, dropout, attn_dropout)
    if part == "decoder" or not model.vision:
        return dec_cfg
    import transformers as tf
    v = model.vision[0]
    if len(model.projectors) != 1 or model.projectors[0].kind != "mlp2":
        raise InputError("model.projectors", [p.kind for p in model.projectors],
                         "one 'mlp2' projector (LLaVA-style) for `measure`")
    n_img = int(llm_tokens_per_image(model))
    cfg = tf.LlavaConfig(vision_config=_vision_config(v, attn), text_config=dec_cfg,
                         image_token_index=dec_cfg.vocab_size - 1, image_seq_length=n_img,
                         projector_hidden_act="gelu", vision_feature_layer=-1,
                         vision_feature_select_strategy="default",
                         multimodal_projector_bias=model.projectors[0].bias)
    cfg._attn_implementation = attn
    return cfg


def build_model(model: Model, seq_len: int, attn: str = "sdpa", part: str = "all",
                dtype: Any = None, fake_mode: Any = None, dropout: bool = False,
                device: str = "cpu", attn_dropout: float | None = None) -> Any:
    """A randomly initialised transformers model for ``model`` (train mode).

    ``part="vision"`` builds only the vision tower (``CLIPVisionModel``). With ``fake_mode``
    (a ``FakeTensorMode``) the model is created inside it. Any exception raised by transformers
    while building is turned into an InputError naming the model.
    """
    torch = require_torch()
    import transformers as tf
    cfg = hf_config(model, seq_len, attn, part, dropout, attn_dropout)
    if isinstance(cfg, tf.CLIPVisionConfig):
        cls = tf.CLIPVisionModel
    elif isinstance(cfg, tf.LlavaConfig):
        cls = tf.LlavaForConditionalGeneration
    elif isinstance(cfg, tf.GPT2Config):
        cls = tf.GPT2LMHeadModel
    else:
        cls = tf.AutoModelForCausalLM
    import contextlib
    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    prev = torch.get_default_dtype()
    try:
        # build directly in the target dtype (a .to() afterwards cannot swap fake parameters)
        torch.set_default_dtype(dtype or torch.float32)
        with ctx, torch.device(device):
            m = cls.from_config(cfg) if cls is tf.AutoModelForCausalLM else cls(cfg)
    except InputError:
        raise
    except Exception as e:  # transformers raises many kinds for configs it cannot build
        raise InputError("model", model.name,
                         f"an architecture transformers can build ({type(e).__name__}: {e})") from None
    finally:
        torch.set_default_dtype(prev)
    m.train()
    return m


def make_batch(model: Model, hf_model: Any, seq_len: int, micro_batch: int, part: str = "all",
               images_per_sample: int = 1, seed: int = 0) -> dict[str, Any]:
    """Random token ids (labels = ids) and, for vision models, random pixels."""
    torch = require_torch()
    g = torch.Generator().manual_seed(seed)
    cfg = hf_model.config
    if part == "vision" or cfg.model_type == "clip_vision_model":
        v = model.vision[0]
        return {"pixel_values": torch.randn(micro_batch, v.channels, v.image_size, v.image_size,
                                            generator=g)}
    vocab = model.decoder.vocab
    if cfg.model_type == "llava":
        v = model.vision[0]
        n_img = int(llm_tokens_per_image(model)) * images_per_sample
        if n_img >= seq_len:
            raise InputError("job.seq_len", seq_len,
                             f"more than the {n_img} image tokens of one sample")
        ids = torch.randint(0, vocab - 1, (micro_batch, seq_len), generator=g)
        ids[:, 1:1 + n_img] = cfg.image_token_index
        pix = torch.randn(micro_batch * images_per_sample, v.channels, v.image_size, v.image_size,
                          generator=g)
        labels = ids.clone()
        labels[:, 1:1 + n_img] = -100
        return {"input_ids": ids, "labels": labels, "pixel_values": pix}
    ids = torch.randint(0, vocab, (micro_batch, seq_len), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
