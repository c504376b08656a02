"""The general import path (:mod:`trainplan.catalog.meta_import`): tiny configs built by
transformers on the meta device, read block by block.

Checked against the model itself: total and MoE-active parameters equal the sum of ``numel``
(active: the routed experts' tensors scaled by top_k / E); where a hand-written importer exists
the two paths give the same stack; one step's FLOPs within 1% of FlopCounterMode on a real CPU
forward and backward of a tiny model; unknown modules refused naming class and path. The whole
auto mapping is in ``benchmarks/catalog_general.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from trainplan.catalog import meta_import
from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.costmodel.params import model_params
from trainplan.errors import InputError

TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
MOE = dict(TINY, num_experts=8, num_local_experts=8, num_experts_per_tok=2,
           moe_intermediate_size=32, shared_expert_intermediate_size=48)
CASES = {
    "llama": dict(TINY, head_dim=24),                       # head_dim != hidden / heads
    "qwen2": dict(TINY, tie_word_embeddings=True),
    "qwen3": dict(TINY, head_dim=16),                       # QK-norm over head_dim
    "olmo2": TINY,                                          # QK-norm over all heads, post-norms
    "gemma2": dict(TINY, head_dim=16, sliding_window=32),
    "mixtral": MOE,
    "qwen2_moe": MOE,                                       # shared expert and its gate
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=512),
    "gpt_neox": dict(TINY, num_key_value_heads=4),
    "deepseek_v3": dict(TINY, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1,
                        first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=24,
                        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, n_group=2,
                        topk_group=1, moe_intermediate_size=32, num_experts_per_tok=2),
}
NO_HAND_IMPORTER = {
    "olmoe": dict(MOE),
    "opt": dict(vocab_size=512, hidden_size=64, ffn_dim=96, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128, word_embed_proj_dim=64),
    "starcoder2": dict(TINY, sliding_window=None),
}
_EXPERTS = re.compile(r"(^|\.)experts\.")

torch_only = pytest.mark.torch


def _cfg(mt: str, d: dict) -> dict:
    return {"model_type": mt, **d}


def _reference(cfg: dict, moe) -> tuple[int, int]:
    built = meta_import.build_meta(meta_import.hf_config_object(cfg))
    total = inactive = 0
    for name, p in built.named_parameters():
        total += p.numel()
        if moe and _EXPERTS.search(name):
            inactive += p.numel() * (moe.num_experts - moe.top_k) // moe.num_experts
    return total, total - inactive


@torch_only
@pytest.mark.parametrize("mt", sorted(CASES) + sorted(NO_HAND_IMPORTER))
def test_general_path_exact_in_total_and_active_params(mt):
    pytest.importorskip("transformers")
    cfg = _cfg(mt, {**CASES, **NO_HAND_IMPORTER}[mt])
    m = meta_import.model_from_transformers(cfg, mt)
    p = model_params(m)
    assert (p.total, p.active) == _reference(cfg, m.decoder.moe)


@torch_only
@pytest.mark.parametrize("mt", sorted(CASES))
def test_general_path_agrees_with_the_hand_written_importer(mt):
    pytest.importorskip("transformers")
    cfg = _cfg(mt, CASES[mt])
    general = meta_import.model_from_transformers(cfg, mt).decoder
    assert model_params(meta_import.model_from_transformers(cfg, mt)).total == \
        model_params(model_from_hf_config(cfg, mt)).total
    hand = model_from_hf_config(cfg, mt).decoder
    for f in ("layers", "hidden", "heads", "n_kv", "d_head", "mlp", "tied_embeddings", "qk_norm",
              "norms_per_layer", "attn_bias", "attn_out_bias"):
        assert getattr(general, f) == getattr(hand, f), f


@torch_only
def test_structure_read_from_the_model():
    pytest.importorskip("transformers")
    d = meta_import.model_from_transformers(_cfg("gemma2", CASES["gemma2"]), "g").decoder
    assert (d.sliding_window, d.sliding_layers, d.norms_per_layer) == (32, 2, 4)  # layers 0, 2
    d = meta_import.model_from_transformers(_cfg("qwen2_moe", MOE), "q").decoder
    assert (d.moe.num_experts, d.moe.top_k, d.moe.shared_expert_ffn_hidden,
            d.moe.shared_expert_gate) == (8, 2, 48, True)
    d = meta_import.model_from_transformers(_cfg("opt", NO_HAND_IMPORTER["opt"]), "o").decoder
    assert (d.position, d.max_positions, d.mlp, d.tied_embeddings) == ("learned", 130, "gelu", True)


@torch_only
@pytest.mark.parametrize("mt,module", [
    ("mamba", "MambaMixer at backbone.layers.0.mixer"),
    ("gpt_oss", "GptOssAttention at model.layers.0.self_attn"),
    ("bart", "BartAttention at model.decoder.layers.0.encoder_attn"),
])
def test_unknown_modules_refused_naming_class_and_path(mt, module):
    pytest.importorskip("transformers")
    small = {"mamba": dict(hidden_size=64, num_hidden_layers=2, vocab_size=512, state_size=8),
             "gpt_oss": dict(TINY, num_local_experts=4, head_dim=16),
             "bart": dict(d_model=64, decoder_layers=2, encoder_layers=2, vocab_size=512,
                          decoder_attention_heads=4, decoder_ffn_dim=96)}[mt]
    with pytest.raises(InputError) as e:
        meta_import.model_from_transformers(_cfg(mt, small), mt)
    assert e.value.value == module


@torch_only
@pytest.mark.parametrize("mt", ["olmoe", "opt", "llama"])
def test_flops_within_one_percent_of_flop_counter_on_cpu(mt):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from trainplan.costmodel import flops as fl
    cfg = _cfg(mt, {**CASES, **NO_HAND_IMPORTER}[mt])
    conf = meta_import.hf_config_object(cfg)
    import transformers as tf
    torch.manual_seed(0)
    # batched_mm: one GEMM per token and chosen expert, which FlopCounterMode counts (the
    # default grouped kernel is not a counted op)
    model = tf.AutoModelForCausalLM.from_config(conf, attn_implementation="eager",
                                                experts_implementation="batched_mm")
    seq = 32
    ids = torch.randint(0, 512, (1, seq))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    dec = meta_import.model_from_module(model, conf, mt).decoder
    mine = 3.0 * seq * (fl.matmul_forward_flops_per_token(dec) + dec.layers * float(
        fl.attention_core_flops_per_token(dec, seq, causal=False, window=False)))
    assert abs(mine / counter.get_total_flops() - 1.0) <= 0.01


def test_without_the_torch_extra_the_refusal_says_to_install_it(monkeypatch):
    monkeypatch.setattr(meta_import, "available", lambda: False)
    with pytest.raises(InputError) as e:
        model_from_hf_config({"model_type": "mamba", **MOE})   # no hand-written importer
    assert e.value.field == "config.model_type" and "trainplan[torch]" in str(e.value)


@torch_only
def test_a_config_file_falls_back_to_the_general_path_and_the_cli_refuses_with_exit_2(tmp_path):
    pytest.importorskip("transformers")
    from trainplan.catalog import get_model
    ok, bad = tmp_path / "olmoe.json", tmp_path / "mamba.json"
    ok.write_text(json.dumps(_cfg("olmoe", MOE)))
    bad.write_text(json.dumps(_cfg("mamba", dict(hidden_size=64, num_hidden_layers=2,
                                                 vocab_size=512))))
    m = get_model(str(ok))                      # what `estimate --model` and the services call
    assert m.decoder.moe is not None and model_params(m).total == _reference(
        _cfg("olmoe", MOE), m.decoder.moe)[0]
    r = subprocess.run([sys.executable, "-m", "trainplan", "estimate", "--gpu", "h100", "--gpus",
                        "8", "--model", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and "MambaMixer at backbone.layers.0.mixer" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


@torch_only
def test_a_type_transformers_does_not_know_is_refused_naming_model_type():
    pytest.importorskip("transformers")
    with pytest.raises(InputError) as e:
        model_from_hf_config({"model_type": "no_such_family", **TINY})
    assert (e.value.field, e.value.value) == ("config.model_type", "no_such_family")
