"""Hugging Face text config import: each family's shapes, and bad fields -> InputError naming them."""

from __future__ import annotations

import copy
import json
import math

import pytest
from typer.testing import CliRunner

from trainplan.catalog.hf import TEXT_TYPES
from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.catalog.models import _index
from trainplan.cli import app
from trainplan.errors import InputError

BASE = {mt: next(r["config"] for r in _index().values()
                 if r.get("config", {}).get("model_type") == mt)
        for mt in ("llama", "qwen3_moe", "deepseek_v3", "gemma2", "gemma3_text", "olmo2",
                   "mistral", "gpt2")}


def _dec(cfg):
    return model_from_hf_config(cfg, name="t").decoder


def test_every_supported_type_listed():
    assert {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
            "deepseek_v2", "deepseek_v3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
            "granite", "gpt2", "gpt_neox"} <= set(TEXT_TYPES)


def test_family_features_read():
    ds = _dec(BASE["deepseek_v3"])
    assert ds.mla.kv_lora_rank == 512 and ds.mla.q_lora_rank == 1536
    assert ds.moe.num_experts == 256 and ds.moe.dense_layers == 3 and ds.moe.shared_experts == 1
    assert ds.mtp_layers == 1
    g2 = _dec(BASE["gemma2"])
    assert g2.norms_per_layer == 4 and g2.sliding_layers == (g2.layers + 1) // 2
    assert g2.final_logit_softcap == 30.0 and g2.tied_embeddings
    g3 = _dec(BASE["gemma3_text"])
    assert g3.qk_norm == "head" and g3.sliding_layers == g3.layers - g3.layers // 6
    assert _dec(BASE["olmo2"]).qk_norm == "full"
    assert _dec(BASE["mistral"]).sliding_layers in (0, 32)
    q = _dec(BASE["qwen3_moe"])
    assert q.moe.num_experts == 128 and q.moe.top_k == 8 and q.moe.shared_experts == 0


def test_explicit_layer_types_and_qwen_window_flags():
    cfg = copy.deepcopy(BASE["gemma3_text"])
    cfg["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]
    assert _dec(cfg).sliding_layers == 0
    q = dict(BASE["llama"], model_type="qwen2", use_sliding_window=True, sliding_window=4096,
             max_window_layers=10)
    d = _dec(q)
    assert d.sliding_layers == d.layers - 10 and d.sliding_window == 4096
    q["use_sliding_window"] = False
    assert _dec(q).sliding_layers == 0


def test_qwen3_moe_as_transformers_5_writes_it():
    """transformers 5 serialises Qwen3-MoE's expert count as num_local_experts."""
    cfg = dict(BASE["qwen3_moe"])
    cfg["num_local_experts"] = cfg.pop("num_experts")
    assert _dec(cfg).moe.num_experts == 128


@pytest.mark.parametrize("mt, field", [
    ("llama", "hidden_size"), ("llama", "num_hidden_layers"), ("llama", "vocab_size"),
    ("qwen3_moe", "num_experts"), ("qwen3_moe", "moe_intermediate_size"),
    ("deepseek_v3", "kv_lora_rank"), ("deepseek_v3", "qk_rope_head_dim"),
    ("deepseek_v3", "first_k_dense_replace"), ("gemma2", "sliding_window"),
    ("gemma3_text", "head_dim"), ("gpt2", "n_embd"),
])
@pytest.mark.parametrize("bad", ["4096", float("nan"), float("inf"), 1e400, 12.5, -3, True, [1]])
def test_bad_field_names_the_field(mt, field, bad):
    cfg = copy.deepcopy(BASE[mt])
    cfg[field] = bad
    with pytest.raises(InputError) as e:
        _dec(cfg)
    assert field in e.value.field
    if isinstance(bad, float) and math.isnan(bad):
        assert "nan" in str(e.value).lower()


@pytest.mark.parametrize("mt, field", [("llama", "hidden_size"), ("deepseek_v3", "v_head_dim"),
                                       ("qwen3_moe", "num_experts_per_tok"), ("gpt2", "n_layer")])
def test_missing_field_names_the_field(mt, field):
    cfg = copy.deepcopy(BASE[mt])
    del cfg[field]
    with pytest.raises(InputError) as e:
        _dec(cfg)
    assert field in e.value.field


def test_bad_flags_and_lists():
    for field, bad in (("tie_word_embeddings", "yes"), ("attention_bias", 1),
                       ("layer_types", ["sliding_attention"]), ("final_logit_softcapping", "x")):
        base = BASE["gemma3_text"] if field != "attention_bias" else BASE["llama"]
        cfg = dict(base, **{field: bad})
        with pytest.raises(InputError) as e:
            _dec(cfg)
        assert field in e.value.field


def test_cli_exits_2_on_a_bad_config(tmp_path):
    cfg = dict(BASE["deepseek_v3"], kv_lora_rank="512")
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    r = CliRunner().invoke(app, ["estimate", "--model", str(p), "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "kv_lora_rank" in r.output and "Traceback" not in r.output
