"""Architecture acceptance: DeepSeek-V3 (MLA + fine-grained MoE) and Gemma 3 (sliding/global
layers) estimates differ from a dense MHA twin in the directions the architecture implies.

Each twin is a Hugging Face config.json written next to the test: the same width, depth and
vocabulary, with the feature in question taken away (a dense MHA Llama of the same total
parameters; Gemma 3 with every layer global). Both run through ``trainplan estimate --json``.
"""

from __future__ import annotations

import copy
import json


from trainplan.catalog.models import _index, get_model
from trainplan.cli import app
from trainplan.costmodel import attention as att
from trainplan.costmodel import flops as fl
from trainplan.costmodel.params import model_params
from cli_helpers import runner

DSV3_LAYOUT = ["--gpu", "h100", "--gpus", "256", "--tp", "8", "--pp", "8", "--uneven-stages",
               "--seq-len", "4096", "--global-batch", "1024", "--json"]


def _estimate(model: str, *args: str) -> dict:
    r = runner.invoke(app, ["estimate", "--model", model, *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _dense_mha_twin(tmp_path, total_params: int) -> str:
    """A dense MHA Llama with DeepSeek-V3's width (7168), depth (61) and vocabulary, its FFN
    sized so the total parameter count equals DeepSeek-V3's (to 0.1%)."""
    h, layers, vocab, heads = 7168, 61, 129280, 56          # 56 heads x 128 = 7168, MHA
    per_layer = (total_params - 2 * vocab * h) / layers - 4 * h * h - 2 * h
    cfg = {"model_type": "llama", "hidden_size": h, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": heads,
           "intermediate_size": int(per_layer / (3 * h)), "vocab_size": vocab,
           "max_position_embeddings": 163840, "tie_word_embeddings": False}
    p = tmp_path / "dense-twin" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(cfg))
    return str(p)


def test_deepseek_v3_moe_needs_far_fewer_flops_than_a_dense_twin(tmp_path):
    """MoE: each token runs 8 of 256 routed experts plus the shared one, so DeepSeek-V3's step
    FLOPs follow its ~37.6B active parameters, not its 671B total: about 6 x active per token,
    an order of magnitude below the dense twin of the same total size, and its step is faster
    on the same 256 H100s."""
    moe = _estimate("deepseek-v3", *DSV3_LAYOUT, "--ep", "4")
    twin = _estimate(_dense_mha_twin(tmp_path, moe["params_total"]), *DSV3_LAYOUT)
    assert abs(twin["params_total"] / moe["params_total"] - 1) < 1e-3
    assert moe["params_active"] < 0.06 * moe["params_total"]
    tokens = moe["tokens_per_step"]
    per_token = moe["model_flops_per_step"] / tokens
    assert 6 * moe["params_active"] < per_token < 1.3 * 6 * moe["params_active"], \
        "MoE FLOPs per token should follow the active parameters (top-k + shared experts)"
    assert moe["model_flops_per_step"] < 0.1 * twin["model_flops_per_step"], \
        "routed experts: a token pays for 9 of 257 expert FFNs, not all of them"
    assert moe["time"]["step_s"] < twin["time"]["step_s"]


def test_deepseek_v3_mla_caches_a_latent_not_keys_and_values():
    """MLA: a layer caches the 512-wide KV latent plus the 64-wide shared RoPE key per token
    (DeepSeek-V2 sec. 2.1.2), 576 elements against 2 x 128 heads x 128 = 32,768 for MHA with the
    same heads -- 57x less KV memory when generating. Training keeps the decompressed per-head K
    and V for the attention kernel, so its activations are not smaller: trainplan counts both."""
    ds = get_model("deepseek-v3").decoder
    mha = ds.model_copy(update={"mla": None, "head_dim": 128, "kv_heads": None})
    assert att.kv_cache_elems_per_token(ds) == 576
    assert att.kv_cache_elems_per_token(mha) == 32768
    assert att.kv_cache_elems_per_token(ds) * 50 < att.kv_cache_elems_per_token(mha)
    from trainplan.costmodel.ops import kept_bytes_per_token
    assert sum(kept_bytes_per_token(ds, True)[:2]) > sum(kept_bytes_per_token(mha, True)[:2])


def _gemma3_all_global(tmp_path) -> str:
    cfg = copy.deepcopy(_index()["gemma-3-1b"]["config"])
    cfg["sliding_window_pattern"] = 1                        # every layer global
    p = tmp_path / "gemma3-global" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(cfg))
    return str(p)


def test_gemma3_sliding_layers_cut_attention_flops_at_long_context(tmp_path):
    """Sliding window: 22 of Gemma 3 1B's 26 layers attend to at most 512 keys, so at 32K context
    its attention FLOPs and step time fall well below the same model with every layer global;
    at a context shorter than the window nothing changes. Parameters are identical."""
    args = ["--gpu", "h100", "--gpus", "8", "--global-batch", "64", "--json"]
    twin = _gemma3_all_global(tmp_path)
    g_long = _estimate("gemma-3-1b", *args, "--seq-len", "32768")
    t_long = _estimate(twin, *args, "--seq-len", "32768")
    assert g_long["params_total"] == t_long["params_total"]
    assert g_long["model_flops_per_step"] < 0.7 * t_long["model_flops_per_step"], \
        "sliding-window layers: 512 keys per query instead of up to 32K"
    assert g_long["time"]["step_s"] < t_long["time"]["step_s"]
    g_short = _estimate("gemma-3-1b", *args, "--seq-len", "512")
    t_short = _estimate(twin, *args, "--seq-len", "512")
    assert g_short["model_flops_per_step"] == t_short["model_flops_per_step"]


def test_sliding_window_mean_keys():
    """The windowed mean of keys per query: (s+1)/2 up to the window, then
    (w(w+1)/2 + (s-w)w)/s; e.g. s = 8, w = 4: (10 + 16)/8 = 3.25."""
    assert float(att.mean_keys_causal(8, 4)) == 3.25
    assert float(att.mean_keys_causal(4, 4)) == 2.5
    g = get_model("gemma-3-1b").decoder
    assert g.sliding_layers == 22 and g.sliding_window == 512
    full = fl.attention_core_flops_per_token(g, 32768, window=False)
    win = fl.attention_core_flops_per_token(g, 32768)
    assert win < 0.2 * full


def test_moe_active_parameters_of_the_moe_presets():
    """Active per token = total less the routed experts a token skips (checked exactly against
    transformers in test_exactness); for Qwen3-30B-A3B about 3.3B, as its name says."""
    p = model_params(get_model("qwen3-30b-a3b"))
    assert 3.2e9 < p.active < 3.4e9 and 30e9 < p.total < 31e9
