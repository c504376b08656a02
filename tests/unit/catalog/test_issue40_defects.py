"""Issue 40's silently wrong imports, each fixed: the tie flag at any level of a Qwen2-VL or LLaVA
config, an unsupported decoder inside a VLM refused by name (never read as Llama), GPT-NeoX's
``attention_bias``, InternViT's QK-norm and LLaVA's several vision feature layers counted.

Expected values by hand from the transformers modules (``configuration_qwen2_vl.py`` forwards
the tie flag; ``modeling_gpt_neox.py`` ``query_key_value``/``dense`` bias=attention_bias;
``modeling_internvl.py`` ``q_norm``/``k_norm`` RMSNorm(embed_dim); ``modeling_llava.py``
``linear_1`` in = vision hidden x feature layers); where torch is installed, also against
transformers itself built on the meta device.
"""

from __future__ import annotations

import copy

import pytest

from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.catalog.vlm import vision_presets
from trainplan.costmodel.params import model_params, projector_params
from trainplan.errors import InputError

CONFIGS = {r["id"]: r["config"] for r in vision_presets()}
QWEN2VL_TEXT = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                "rms_norm_eps", "rope_theta")


def _qwen2vl_v5(tie: bool) -> dict:
    """Qwen2-VL-7B as transformers 5 saves it: text fields in text_config, the tie flag only at
    the top level."""
    old = copy.deepcopy(CONFIGS["qwen2-vl-7b"])
    text = {k: old.pop(k) for k in QWEN2VL_TEXT}
    old.pop("tie_word_embeddings")
    return {**old, "text_config": {"model_type": "qwen2_vl_text", **text},
            "tie_word_embeddings": tie}


def test_qwen2vl_tie_flag_read_at_the_top_level():
    tied = model_from_hf_config(_qwen2vl_v5(True))
    untied = model_from_hf_config(_qwen2vl_v5(False))
    assert tied.decoder.tied_embeddings and not untied.decoder.tied_embeddings
    # the untied head is one more vocab x hidden matrix (152064 x 3584)
    assert model_params(untied).total - model_params(tied).total == 152064 * 3584


def test_qwen2vl_tie_flag_forwarded_from_text_config():
    cfg = _qwen2vl_v5(False)
    del cfg["tie_word_embeddings"]
    cfg["text_config"]["tie_word_embeddings"] = True      # a pre-v5 save
    assert model_from_hf_config(cfg).decoder.tied_embeddings


def test_llava_tie_flag_read_at_the_top_level():
    cfg = copy.deepcopy(CONFIGS["llava-1.5-7b"])
    cfg["tie_word_embeddings"] = True
    cfg["text_config"]["tie_word_embeddings"] = False
    assert model_from_hf_config(cfg).decoder.tied_embeddings      # LlavaConfig reads the outer


@pytest.mark.parametrize("pid", ["llava-1.5-7b", "internvl3-8b", "llava-onevision-7b",
                                 "idefics3-8b", "smolvlm-256m"])
def test_unsupported_decoder_inside_a_vlm_is_refused_by_name(pid):
    cfg = copy.deepcopy(CONFIGS[pid])
    cfg["text_config"]["model_type"] = "rwkv"
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "config.text_config.model_type" and e.value.value == "rwkv"


def _neox(**kw) -> dict:
    return {"model_type": "gpt_neox", "vocab_size": 50432, "hidden_size": 512,
            "intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 8, **kw}


def test_gpt_neox_attention_bias_honoured():
    with_bias = model_params(model_from_hf_config(_neox())).total
    without = model_params(model_from_hf_config(_neox(attention_bias=False))).total
    assert with_bias - without == 4 * (3 * 512 + 512)      # query_key_value and dense biases


def _internvl_qk(layers: int = 2) -> dict:
    cfg = copy.deepcopy(CONFIGS["internvl3-8b"])
    cfg["vision_config"].update(use_qk_norm=True, num_hidden_layers=layers)
    return cfg


def test_internvit_qk_norm_counted():
    m = model_from_hf_config(_internvl_qk())
    cfg = copy.deepcopy(_internvl_qk())
    cfg["vision_config"]["use_qk_norm"] = False
    base = model_from_hf_config(cfg)
    h = m.vision[0].hidden
    assert m.vision[0].qk_norm == "full"
    assert model_params(m).total - model_params(base).total == 2 * 2 * h   # 2 layers, q and k


def _llava_layers(layers) -> dict:
    cfg = copy.deepcopy(CONFIGS["llava-1.5-7b"])
    cfg["vision_feature_layer"] = layers
    return cfg


def test_llava_several_feature_layers_counted():
    m = model_from_hf_config(_llava_layers([-2, -5, 3]))
    v, p = m.vision[0], m.projectors[0]
    assert p.in_dim == 3 * 1024                       # three hidden states concatenated
    assert v.forward_only_layers == 1                 # the deepest read is -2: the last layer unused
    assert projector_params(p) == 3 * 1024 * 4096 + 4096 + 4096 * 4096 + 4096
    with pytest.raises(InputError) as e:
        model_from_hf_config(_llava_layers([-2, 99]))
    assert e.value.field == "config.vision_feature_layer[1]"


@pytest.mark.torch
@pytest.mark.parametrize("cfg", [_qwen2vl_v5(True), _internvl_qk(), _llava_layers([-2, -5])],
                         ids=["qwen2vl-v5-tied", "internvit-qk-norm", "llava-two-layers"])
def test_fixed_vlms_exact_against_transformers(cfg):
    pytest.importorskip("transformers")
    from trainplan.measure import reference_vision as R
    ref = R.reference_params(cfg)
    m = model_from_hf_config(cfg)
    p = model_params(m)
    assert p.total == ref["total"]
    assert p.projectors == ref["projector"]


@pytest.mark.torch
def test_gpt_neox_without_attention_bias_exact_against_transformers():
    pytest.importorskip("transformers")
    from trainplan.measure import reference as R
    cfg = _neox(attention_bias=False)
    total, _ = R.param_counts(R.build_meta(cfg))
    assert model_params(model_from_hf_config(cfg)).total == total
