"""Model presets by id, by the Hugging Face repo id they reproduce, and misspelt."""

import pytest

from trainplan.catalog import get_model
from trainplan.errors import InputError


@pytest.mark.parametrize("hf_id, preset", [("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
                                           ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
                                           ("openai-community/gpt2", "gpt2")])
def test_a_hugging_face_id_names_the_preset_that_reproduces_its_config(hf_id, preset):
    assert get_model(hf_id) is get_model(preset)


def test_misspelt_or_unknown_models_get_a_suggestion():
    with pytest.raises(InputError) as e:
        get_model("llama-3-8")
    assert "did you mean llama-3-8b" in str(e.value)
    with pytest.raises(InputError) as e:
        get_model("some-org/unknown-model")
    assert "pass its config.json" in str(e.value)
