"""Job files: an unknown key, at the top or in a nested table, is named with its path, its value
and the keys that are valid there (exit 2 on the command line, never a traceback)."""

from __future__ import annotations

import pytest

from cli_helpers import assert_exits_2, invoke
from trainplan.errors import InputError
from trainplan.services.jobfile import build_inputs, read_file

STACK = {"layers": 2, "hidden": 128, "heads": 4, "ffn_hidden": 344, "vocab": 1000}


@pytest.mark.parametrize("name, text", [
    ("j.toml", '[model]\npreset = "llama-3-8b"\n[strategy]\ntpp = 2\n'),
    ("j.yaml", "model: {preset: llama-3-8b}\nstrategy: {tpp: 2}\n"),
    ("j.json", '{"model": {"preset": "llama-3-8b"}, "strategy": {"tpp": 2}}'),
])
def test_an_unknown_key_in_a_nested_table_names_its_path_and_the_valid_keys(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    assert_exits_2(invoke("estimate", p), "strategy.tpp = 2", "not a key of Strategy",
                   "did you mean tp or pp?", "keys: cp, dp, ep")


def test_a_key_in_a_list_of_tables_is_checked_against_the_item_spec_not_the_outer_one():
    with pytest.raises(InputError) as e:
        build_inputs({"model": {"name": "x", "stacks": [{**STACK, "headz": 4}]}})
    msg = str(e.value)
    assert "model.stacks.0.headz = 4" in msg and "not a key of Stack" in msg
    assert "did you mean heads" in msg and "not a key of Model" not in msg
    with pytest.raises(InputError) as e:                  # two levels down: stacks[0].moe
        build_inputs({"model": {"name": "x", "stacks": [{**STACK, "moe": {
            "num_experts": 8, "top_k": 2, "expert_ffn_hidden": 64, "expertz": 2}}]}})
    assert "model.stacks.0.moe.expertz = 2" in str(e.value) and "not a key of MoE" in str(e.value)


def test_an_unknown_model_key_and_an_unknown_section(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('[model]\npreset = "llama-3-8b"\nhiden = 3\n')
    assert_exits_2(invoke("estimate", p), "model.hiden = 3", "not a key of [model]",
                   "keys: hf_config, name, preset")
    p.write_text('strategi = {tp = 2}\n[model]\npreset = "llama-3-8b"\n')
    with pytest.raises(InputError) as e:
        read_file(p)
    assert e.value.field == "strategi" and "did you mean strategy?" in str(e.value)
    assert_exits_2(invoke("plan", p), "strategi = {'tp': 2} is not valid: not a section of a job "
                   "file; did you mean strategy?", "sections: model, job, cluster, strategy")


def test_integer_keys_in_a_yaml_job_file_are_named(tmp_path):
    """YAML reads ``7: 8`` as an integer key: named as the bad key (issue 45 found a KeyError
    traceback in every command that reads a job file)."""
    import pytest

    from trainplan.errors import InputError
    from trainplan.services.jobfile import read_file
    for text, field in (("1: 2\nmodel: {preset: llama-3-8b}\n", "1"),
                        ("model: {preset: llama-3-8b}\njob: {seq_len: 2048, 7: 8}\n", "job.7")):
        p = tmp_path / "job.yaml"
        p.write_text(text)
        with pytest.raises(InputError) as e:
            read_file(p)
        assert e.value.field == field and "a key that is a name" in str(e.value)
