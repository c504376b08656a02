"""Exact parameter counts against published figures."""

import pytest

from trainplan.catalog import get_model
from trainplan.costmodel.params import model_params


@pytest.mark.parametrize("preset,total,source", [
    ("llama-2-7b", 6_738_415_616, "Llama-2-7B model card / HF safetensors index: 6,738,415,616"),
    ("llama-3-8b", 8_030_261_248, "Meta-Llama-3-8B HF safetensors metadata: 8,030,261,248"),
    ("llama-2-70b", 68_976_648_192, "Llama-2-70B HF: 68.98B"),
    ("qwen2-7b", 7_615_616_512, "Qwen2-7B HF: 7.62B (q/k/v biases)"),
])
def test_exact_counts(preset, total, source):
    assert model_params(get_model(preset)).total == total, source


def test_llama_405b_about_405_85e9():
    # Llama 3.1 405B config (kv heads 8): 405.85e9 (HF safetensors metadata)
    assert model_params(get_model("llama-3.1-405b")).total == pytest.approx(405.85e9, rel=2e-4)


def test_mixtral_total_and_active():
    # Mixtral-8x7B: 46.70e9 total, 12.88e9 active (Jiang et al. 2024, "13B active")
    p = model_params(get_model("mixtral-8x7b"))
    assert p.total == pytest.approx(46.70e9, rel=1e-3)
    assert p.active == pytest.approx(12.88e9, rel=1e-3)


def test_megatron_gpt_formula():
    # Narayanan et al. 2021 sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))
    m = get_model("megatron-gpt-18.4b")
    d = m.decoder
    l, h, V, s = d.layers, d.hidden, d.vocab, d.max_positions
    formula = 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    assert model_params(m).total == pytest.approx(formula, rel=1e-9) or \
        model_params(m).total == pytest.approx(formula + 2 * h, rel=1e-9)


def test_hf_import_matches_preset(tmp_path):
    import json
    from trainplan.catalog import load_hf_config
    cfg = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
           "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 32, "tie_word_embeddings": False}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    assert model_params(load_hf_config(f)).total == 6_738_415_616


def test_hf_import_bad_type(tmp_path):
    import json
    from trainplan.catalog import load_hf_config
    from trainplan.errors import InputError
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "nonsense"}))
    with pytest.raises(InputError, match="model_type"):
        load_hf_config(f)
    f.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(InputError, match="num_hidden_layers|vocab_size|intermediate_size|num_attention_heads"):
        load_hf_config(f)
