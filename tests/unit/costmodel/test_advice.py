"""The estimate's warnings about the input: sequence beyond the model, frozen parts with LoRA;
and the plain-PyTorch memory with gradient accumulation."""

import pytest

import trainplan


def _warnings(model, **job):
    return trainplan.estimate(model, gpu="h100", gpus=8, **job).warnings


def test_sequence_beyond_the_position_table_or_the_trained_context():
    w = _warnings("gpt2", seq_len=8192, global_batch=8)
    assert any("learned position table (1024 positions)" in x and "5,505,024" in x for x in w)
    assert not any("position table" in x for x in _warnings("gpt2", seq_len=1024, global_batch=8))
    w = _warnings("llama-3-8b", seq_len=32768, global_batch=8)
    assert any("8192 tokens Llama-3-8B was trained on" in x for x in w)
    assert not any("trained on" in x for x in _warnings("llama-3-8b", seq_len=8192,
                                                        global_batch=8))


def test_frozen_list_beside_lora_is_named_as_changing_nothing():
    w = _warnings("llava-1.5-7b", trainable="lora", frozen=["vision"])
    assert any("changes nothing with LoRA" in x for x in w)
    lora = trainplan.estimate("llava-1.5-7b", trainable="lora", frozen=["vision"]).memory
    plain = trainplan.estimate("llava-1.5-7b", trainable="lora").memory
    assert lora.total_gib == plain.total_gib
    assert not any("LoRA" in x for x in _warnings("llava-1.5-7b", frozen=["vision"]))


def test_pytorch_gradients_held_through_accumulated_micro_batches():
    kw = dict(gpu="a100_sxm_40gb", gpus=1, framework="pytorch", seq_len=6144)
    one = trainplan.estimate("llama-3.2-1b", global_batch=1, **kw).memory
    eight = trainplan.estimate("llama-3.2-1b", global_batch=8, **kw).memory
    assert one.gradients_gib == 0.0 and one.fits
    # fp32 gradients of every parameter (torch.amp): 4 bytes x 1.236e9 parameters
    assert eight.gradients_gib == pytest.approx(4 * 1_235_814_400 / 2**30, rel=1e-3)
    assert eight.total_gib == pytest.approx(one.total_gib + eight.gradients_gib, rel=1e-6)
    assert not eight.fits


def test_lora_rank_beyond_half_the_width_is_named_and_adapters_counted():
    w = _warnings("llama-3-8b", trainable="lora", lora_rank=4096)
    assert any("over half the width (4096)" in x for x in w)
    assert not any("half the width" in x for x in _warnings("llama-3-8b", trainable="lora",
                                                                lora_rank=64))
    e = trainplan.estimate("llama-3-8b", trainable="lora", lora_rank=16)
    # r (d_in + d_out) per adapted matrix, 7 matrices per layer, 32 layers
    per_layer = 16 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336))
    assert f"({32 * per_layer:,} adapter parameters)" in " ".join(e.assumptions)


def test_expert_parallel_estimates_name_the_balanced_routing_they_assume():
    ep = trainplan.estimate("mixtral-8x7b", gpu="h100", gpus=64, strategy={"ep": 8}).warnings
    assert any("EP 8" in x and "balanced, dropless routing" in x for x in ep)
    # without EP no rank waits for another's experts: no such warning; dense models never
    assert not any("dropless" in x for x in trainplan.estimate("mixtral-8x7b", gpu="h100",
                                                               gpus=64).warnings)
    assert not any("dropless" in x for x in _warnings("llama-3-8b"))


def test_a_four_bit_base_says_its_step_time_is_a_lower_bound():
    q = trainplan.estimate("llama-3-8b", gpu="l40s", gpus=1, framework="pytorch", trainable="lora",
                           base_weights="nf4", seq_len=2048, global_batch=16,
                           strategy={"micro_batch": 1, "recompute": "full"}).warnings
    assert any("nf4 base" in x and "lower bound" in x for x in q)
    assert not any("lower bound" in x for x in _warnings("llama-3-8b"))
