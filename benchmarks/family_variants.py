"""Config variants for ``catalog_exactness.py``: each newer family's transformers default config
shrunk (width, layers, vocabulary, experts: so the meta build and trace take seconds) and varied
in the switches its importer reads (biases, tying, layer patterns, MoE layouts); the traced
copies go through ``trainplan.measure.reference.exercised`` (windows and chunks shrunk, the
sequence at least twice the longest).

The shapes are test shapes, not published models: they check the importers' reading of each
switch against what transformers builds from it.
"""

from __future__ import annotations

from typing import Any

from trainplan.measure.reference import exercised  # noqa: F401  (re-exported for the benchmark)

SMALL = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             intermediate_size=512, vocab_size=1024, num_hidden_layers=4)

#: (label, model_type, overrides on the default config after SMALL)
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    ("gpt_oss small", "gpt_oss", dict(num_local_experts=8, num_experts_per_tok=2)),
    ("gpt_oss tied", "gpt_oss", dict(num_local_experts=4, num_experts_per_tok=1,
                                     tie_word_embeddings=True)),
    ("gpt_oss all-full", "gpt_oss", dict(num_local_experts=4, num_experts_per_tok=2,
                                         layer_types=["full_attention"] * 4)),
    ("llama4_text scout-like", "llama4_text", dict(num_local_experts=4, intermediate_size_mlp=768)),
    ("llama4_text maverick-like", "llama4_text", dict(
        num_local_experts=8, intermediate_size_mlp=768, interleave_moe_layer_step=2,
        moe_layers=None)),
    ("llama4_text dense-only", "llama4_text", dict(num_local_experts=4, moe_layers=[],
                                                   intermediate_size_mlp=640)),
    ("llama4_text bias", "llama4_text", dict(num_local_experts=4, attention_bias=True,
                                             no_rope_layers=[1, 0, 1, 0])),
    ("qwen3_next small", "qwen3_next", dict(num_experts=8, num_experts_per_tok=2,
                                            moe_intermediate_size=128,
                                            shared_expert_intermediate_size=128,
                                            linear_num_key_heads=2, linear_num_value_heads=4,
                                            linear_key_head_dim=32, linear_value_head_dim=32)),
    ("qwen3_next dense-first", "qwen3_next", dict(num_experts=8, num_experts_per_tok=2,
                                                  moe_intermediate_size=128,
                                                  shared_expert_intermediate_size=64,
                                                  mlp_only_layers=[0], linear_num_key_heads=4,
                                                  linear_num_value_heads=4,
                                                  linear_key_head_dim=32,
                                                  linear_value_head_dim=32)),
    ("bamba attn 1,3", "bamba", dict(attn_layer_indices=[1, 3], mamba_n_heads=8,
                                     mamba_d_state=32, mamba_n_groups=2)),
    ("bamba all-mamba bias", "bamba", dict(mamba_n_heads=16, mamba_d_head=32, mamba_d_state=16,
                                           mamba_proj_bias=True, mamba_conv_bias=False,
                                           num_hidden_layers=3, attn_layer_indices=[2])),
    ("falcon_h1 small", "falcon_h1", dict(mamba_d_ssm=512, mamba_n_heads=8, mamba_d_head=64,
                                          mamba_d_state=32)),
    ("falcon_h1 rmsnorm", "falcon_h1", dict(mamba_d_ssm=256, mamba_n_heads=4, mamba_d_head=64,
                                            mamba_d_state=16,
                                            mamba_rms_norm=True, mamba_n_groups=2,
                                            tie_word_embeddings=True)),
    ("glm4 small", "glm4", dict()),
    ("glm4 no-bias", "glm4", dict(attention_bias=False, tie_word_embeddings=True)),
    ("glm4_moe small", "glm4_moe", dict(n_routed_experts=8, num_experts_per_tok=2,
                                        moe_intermediate_size=128, first_k_dense_replace=1)),
    ("glm4_moe qk-norm groups", "glm4_moe", dict(n_routed_experts=8, num_experts_per_tok=2,
                                                 moe_intermediate_size=128, use_qk_norm=True,
                                                 attention_bias=True, n_group=2, topk_group=1,
                                                 n_shared_experts=2)),
    ("cohere qk-norm", "cohere", dict(use_qk_norm=True, num_key_value_heads=4)),
    ("cohere bias untied", "cohere", dict(attention_bias=True, tie_word_embeddings=False)),
    ("cohere2 small", "cohere2", dict()),
    ("starcoder2 window", "starcoder2", dict(sliding_window=32)),
    ("starcoder2 no-bias", "starcoder2", dict(use_bias=False, tie_word_embeddings=False)),
    ("granitemoe small", "granitemoe", dict(num_local_experts=4, num_experts_per_tok=2)),
    ("olmoe small", "olmoe", dict(num_experts=8, num_experts_per_tok=2)),
    ("olmo3 small", "olmo3", dict()),
    ("exaone4 small", "exaone4", dict()),
    ("exaone4 tied", "exaone4", dict(tie_word_embeddings=True)),
    ("smollm3 small", "smollm3", dict(no_rope_layers=[1, 1, 1, 0])),
    ("smollm3 bias", "smollm3", dict(attention_bias=True, mlp_bias=True,
                                     no_rope_layers=[1, 0, 1, 0])),
    ("seed_oss small", "seed_oss", dict()),
    ("seed_oss out-bias", "seed_oss", dict(attention_out_bias=True, mlp_bias=True)),
    ("apertus small", "apertus", dict()),
    ("ernie4_5_moe small", "ernie4_5_moe", dict(moe_num_experts=8, moe_k=2,
                                                moe_intermediate_size=128,
                                                moe_layer_start_index=1, moe_layer_end_index=3)),
    ("ernie4_5_moe interval 2", "ernie4_5_moe", dict(moe_num_experts=8, moe_k=2,
                                                     moe_intermediate_size=128,
                                                     moe_layer_interval=2,
                                                     moe_layer_start_index=0,
                                                     moe_layer_end_index=3)),
    ("ernie4_5_moe use_bias (refused)", "ernie4_5_moe", dict(use_bias=True)),
    ("qwen3_next 0-wide shared (refused)", "qwen3_next", dict(shared_expert_intermediate_size=0)),
    ("phimoe small", "phimoe", dict(num_local_experts=4, num_experts_per_tok=2)),
    ("phimoe bias", "phimoe", dict(num_local_experts=4, num_experts_per_tok=2,
                                   attention_bias=True)),
    ("ministral small", "ministral", dict(sliding_window=32,
                                          layer_types=["sliding_attention", "full_attention"] * 2)),
    ("falcon 7b-like", "falcon", dict(num_kv_heads=4, ffn_hidden_size=1024)),
    ("falcon 40b-like", "falcon", dict(new_decoder_architecture=True, num_kv_heads=2,
                                       ffn_hidden_size=1024)),
    ("falcon sequential bias", "falcon", dict(parallel_attn=False, multi_query=False, bias=True,
                                              num_kv_heads=4, ffn_hidden_size=1024)),
]


def variant_config(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A shrunk copy of a default config: SMALL, then the overrides; per-layer lists cut to
    the layer count."""
    d = dict(defaults)
    d.update({k: v for k, v in SMALL.items() if k in d or k == "head_dim"})
    d.update(overrides)
    if isinstance(d.get("pad_token_id"), int) and d["pad_token_id"] >= d["vocab_size"]:
        d["pad_token_id"] = 0     # a token id of the shrunk vocabulary
    n = d.get("num_hidden_layers", 4)
    for k in ("layer_types", "no_rope_layers"):
        if isinstance(d.get(k), list) and k not in overrides:
            d[k] = (d[k] * n)[:n] if len(d[k]) < n else d[k][:n]
    if d.get("model_type") == "qwen3_next" and "layer_types" not in overrides:
        d["layer_types"] = ["linear_attention"] * (n - 1) + ["full_attention"]
    if d.get("model_type") == "falcon":
        d.pop("head_dim", None)
        d.pop("intermediate_size", None)
        d.pop("num_key_value_heads", None)
    return d
