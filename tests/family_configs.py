"""Config dicts of the newer families for tests: transformers 5.25's default configs of each
``model_type`` (``configuration_*.py``; the defaults reproduce the flagship's shapes: gpt-oss's
116,829,156,672 parameters are the model card's 116.8B for gpt-oss-120b), written out so the
tests need no transformers."""

GPT_OSS_120B = {
    "model_type": "gpt_oss", "num_hidden_layers": 36, "num_local_experts": 128,
    "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
    "tie_word_embeddings": False, "max_position_embeddings": 131072, "num_experts_per_tok": 4,
    "router_aux_loss_coef": 0.001, "attention_bias": True,
    "layer_types": ["sliding_attention", "full_attention"] * 18}

LLAMA4_SCOUT_TEXT = {
    "model_type": "llama4_text", "vocab_size": 202048, "hidden_size": 5120,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "num_experts_per_tok": 1,
    "num_local_experts": 16, "interleave_moe_layer_step": 1, "use_qk_norm": True,
    "no_rope_layers": [1, 1, 1, 0] * 12, "attention_chunk_size": 8192,
    "layer_types": (["chunked_attention"] * 3 + ["full_attention"]) * 12,
    "attention_bias": False}

QWEN3_NEXT_80B = {
    "model_type": "qwen3_next", "vocab_size": 151936, "hidden_size": 2048,
    "intermediate_size": 5632, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "max_position_embeddings": 32768, "tie_word_embeddings": False,
    "attention_bias": False, "head_dim": 256, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "decoder_sparse_step": 1, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10, "num_experts": 512,
    "norm_topk_prob": True, "mlp_only_layers": [],
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 12}

FALCON_H1 = {
    "model_type": "falcon_h1", "vocab_size": 128000, "tie_word_embeddings": False,
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
    "mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": 8, "mamba_n_groups": 1,
    "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256,
    "mamba_conv_bias": True, "mamba_proj_bias": False, "mamba_rms_norm": False,
    "projectors_bias": False, "attention_bias": False, "mlp_bias": False}

#: parameters transformers 5.25 builds for each (meta device; benchmarks/catalog_exactness.py)
PARAMS = {"gpt_oss": (116_829_156_672, 5_711_982_912),
          "llama4_text": (107_769_861_120, 17_172_894_720),
          "qwen3_next": (79_674_391_296, 3_874_929_408),
          "falcon_h1": (8_514_961_408, 8_514_961_408)}
