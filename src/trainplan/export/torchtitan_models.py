"""The models torchtitan builds, by shape, at the releases the export writes for.

0.2.2: ``[model] name`` and ``flavor`` index ``torchtitan/models/<name>/__init__.py``'s args
dicts (llama3_args: 8B, 70B, 405B; qwen3_args: 0.6B ... 32B, 30B-A3B, 235B-A22B;
deepseekv3_args: 16B = DeepSeek-V2-Lite, 236B = DeepSeek-V2, 671B = DeepSeek-V3).
0.3.0: ``--module <name> --config <function>`` names a function of
``torchtitan/models/<name>/config_registry.py``; not every 0.2.2 flavor has one (no Qwen3 4B,
8B or 235B, no DeepSeek 236B). Keyed by (layers, hidden, heads, FFN, vocabulary, experts) of
the flavor's args as trainplan's presets spell them (Llama 3 and 3.1 share the shape; Mistral
7B differs in the vocabulary).
"""

from __future__ import annotations

from trainplan.errors import InputError

#: shape -> (module, flavor at 0.2.2, config function at 0.3.0 or None, Hugging Face repo of
#: the tokenizer torchtitan's config downloads: scripts/download_hf_assets.py --repo_id)
MODELS: dict[tuple[int, int, int, int, int, int], tuple[str, str, str | None, str]] = {
    (32, 4096, 32, 14336, 128256, 0): ("llama3", "8B", "llama3_8b", "meta-llama/Llama-3.1-8B"),
    (80, 8192, 64, 28672, 128256, 0): ("llama3", "70B", "llama3_70b", "meta-llama/Llama-3.1-70B"),
    (126, 16384, 128, 53248, 128256, 0): ("llama3", "405B", "llama3_405b",
                                          "meta-llama/Llama-3.1-405B"),
    (28, 1024, 16, 3072, 151936, 0): ("qwen3", "0.6B", "qwen3_0_6b", "Qwen/Qwen3-0.6B"),
    (28, 2048, 16, 6144, 151936, 0): ("qwen3", "1.7B", "qwen3_1_7b", "Qwen/Qwen3-1.7B"),
    (36, 2560, 32, 9728, 151936, 0): ("qwen3", "4B", None, "Qwen/Qwen3-4B"),
    (36, 4096, 32, 12288, 151936, 0): ("qwen3", "8B", None, "Qwen/Qwen3-8B"),
    (40, 5120, 40, 17408, 151936, 0): ("qwen3", "14B", "qwen3_14b", "Qwen/Qwen3-14B"),
    (64, 5120, 64, 25600, 151936, 0): ("qwen3", "32B", "qwen3_32b", "Qwen/Qwen3-32B"),
    (48, 2048, 32, 6144, 151936, 128): ("qwen3", "30B-A3B", "qwen3_30b_a3b", "Qwen/Qwen3-30B-A3B"),
    (94, 4096, 64, 12288, 151936, 128): ("qwen3", "235B-A22B", None, "Qwen/Qwen3-235B-A22B"),
    (27, 2048, 16, 10944, 102400, 64): ("deepseek_v3", "16B", "deepseek_v3_16b",
                                        "deepseek-ai/DeepSeek-V2-Lite"),
    (60, 5120, 128, 12288, 102400, 160): ("deepseek_v3", "236B", None, "deepseek-ai/DeepSeek-V2"),
    (61, 7168, 128, 18432, 129280, 256): ("deepseek_v3", "671B", "deepseek_v3_671b",
                                          "deepseek-ai/DeepSeek-V3"),
}


def torchtitan_model(model, version: str) -> tuple[str, str, str | None, str]:
    """(module, flavor, 0.3.0 config function, tokenizer repo) of a model torchtitan builds at
    ``version``; InputError naming the model otherwise (torchtitan has no model for it, and
    emitting another model's flavor would train something else)."""
    d = model.decoder
    key = (d.layers, d.hidden, d.heads, d.ffn_hidden, d.vocab, d.moe.num_experts if d.moe else 0)
    entry = MODELS.get(key)
    if entry is None:
        raise InputError("--emit torchtitan", model.name,
                         "a model torchtitan builds: Llama 3/3.1 8B, 70B, 405B; Qwen3 0.6B-32B, "
                         "30B-A3B, 235B-A22B; DeepSeek-V2-Lite, V2, V3 (emit megatron or "
                         "deepspeed for other models)")
    if version == "0.3.0" and entry[2] is None:
        raise InputError("--framework-version", f"torchtitan={version}",
                         f"torchtitan=0.2.2 for {model.name}: torchtitan 0.3.0's config registry "
                         f"has no {entry[0]} {entry[1]} config (0.2.2's flavors do)")
    return entry
