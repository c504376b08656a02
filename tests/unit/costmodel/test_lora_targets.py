"""LoRA as it is run: target modules, the frozen base's dtype, 8-bit bases, the framework a
LoRA job plans for, and the adapters' activations (costmodel/lora.py, params.lora_matrices,
activations.hf_stage_memory)."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.conventions import GiB, int8_weight_bytes, lora_targets
from trainplan.costmodel.lora import adapted_matrices, adapter_kept_bytes_per_token
from trainplan.costmodel.params import lora_params, model_params, quantized_linear_params
from trainplan.errors import InputError
from trainplan.spec.job import Job

ONE_GPU = dict(gpu="h100", gpus=1, seq_len=2048, global_batch=8, trainable="lora",
               strategy={"micro_batch": 1})


def test_target_names_read_as_projections():
    assert lora_targets("attention") == ("q", "k", "v", "o")
    assert lora_targets("all-linear") == ("q", "k", "v", "o", "gate", "up", "down")
    # NeMo's and transformers' module names, in any order, repeated
    assert lora_targets(["linear_proj", "linear_qkv"]) == ("q", "k", "v", "o")
    assert lora_targets(["v_proj", "q_proj", "q"]) == ("q", "v")
    assert lora_targets(["linear_fc1"]) == ("gate", "up")
    with pytest.raises(ValueError, match="not a LoRA target"):
        lora_targets(["qkv_proj_typo"])


def test_adapter_parameters_by_target_by_hand():
    """Llama-3-8B (h 4096, 32 heads of 128, 8 KV heads, FFN 14336, 32 layers), rank 16:
    q 16(4096+4096), k and v 16(4096+1024) each, o 16(4096+4096); gate, up 16(4096+14336)
    each, down 16(14336+4096)."""
    dec = get_model("llama-3-8b").decoder
    attn = 16 * (8192 + 5120 + 5120 + 8192) * 32
    mlp = 16 * 3 * (4096 + 14336) * 32
    assert lora_params(dec, 16, ("q", "k", "v", "o")) == attn == 13_631_488
    assert lora_params(dec, 16) == attn + mlp == 41_943_040          # all-linear, PEFT/NeMo
    assert lora_params(dec, 16, ("q", "v")) == 16 * (8192 + 5120) * 32
    assert adapted_matrices(dec, ("q", "k", "v", "o")) == (4.0, 4 * 4096.0, 2 * 4096.0 + 2 * 1024.0)


def test_targets_reach_parameters_flops_and_time():
    full = estimate("llama-3-8b", **ONE_GPU, framework="pytorch")
    attn = estimate("llama-3-8b", **ONE_GPU, framework="pytorch", lora_targets="attention")
    dec = get_model("llama-3-8b").decoder
    # model FLOPs: 6 per adapter parameter and token (lora.py)
    tokens = 8 * 2048
    assert full.model_flops_per_step - attn.model_flops_per_step == pytest.approx(
        6.0 * tokens * (lora_params(dec, 16) - lora_params(dec, 16, ("q", "k", "v", "o"))),
        rel=1e-12)
    assert attn.time.step_s < full.time.step_s
    assert attn.memory.optimizer_gib < full.memory.optimizer_gib
    assert any("attention (q, k, v, o)" in a for a in attn.assumptions)


def test_bad_target_is_an_input_error_naming_the_field():
    with pytest.raises(InputError, match="lora_targets"):
        estimate("llama-3-8b", **ONE_GPU, lora_targets=["attn_typo"])


def test_a_lora_job_plans_for_a_framework_with_lora():
    """Megatron-LM's pre-training script has no adapters: a LoRA job that names no framework
    runs on the pytorch profile (HF Trainer + PEFT); a full job keeps megatron; a named one is
    kept; the targets are the framework's unless named."""
    assert Job(trainable="lora").framework == "pytorch"
    assert Job().framework == "megatron"
    assert Job(trainable="lora", framework="nemo").framework == "megatron"
    assert Job(trainable="lora").lora_targets is None
    assert Job(trainable="lora").lora_projections == ("q", "k", "v", "o", "gate", "up", "down")
    assert Job(trainable="lora", framework="torchtune").lora_projections == \
        ("q", "v", "o", "gate", "up", "down")
    assert Job(trainable="lora", lora_targets="attention").lora_projections == ("q", "k", "v", "o")


def test_lora_base_in_the_compute_dtype_under_the_hf_trainer():
    """PEFT/TRL load the base in bf16: 2 B per frozen parameter, 4 B per fp32 adapter
    (autocast_adapter_dtype), no fp32 master of the base and no autocast copy of it."""
    e = estimate("llama-3-8b", **ONE_GPU, framework="pytorch")
    P = model_params(get_model("llama-3-8b")).total
    A = lora_params(get_model("llama-3-8b").decoder, 16)
    assert e.memory.weights_gib * GiB == pytest.approx(2.0 * P + 4.0 * A, rel=1e-12)
    # the 8B LoRA of the issue: 4K tokens on one H100 fits (it was 80.1 of 79.65 GiB)
    big = estimate("llama-3-8b", gpu="h100", gpus=1, seq_len=4096, global_batch=8,
                   trainable="lora", framework="pytorch", strategy={"micro_batch": 1})
    assert big.memory.fits and big.memory.weights_gib < 15.2


def test_an_8bit_base_is_one_byte_and_a_row_scale():
    """bitsandbytes Linear8bitLt: int8 codes plus one fp32 absmax per output row (SCB)."""
    dec = get_model("llama-3-8b").decoder
    lora = estimate("llama-3-8b", **ONE_GPU, framework="pytorch")
    q8 = estimate("llama-3-8b", **ONE_GPU, framework="pytorch", base_weights="int8")
    quant = dec.layers * quantized_linear_params(dec)
    assert int8_weight_bytes(4096) == 1.0 + 4.0 / 4096
    assert (lora.memory.weights_gib - q8.memory.weights_gib) * GiB == pytest.approx(
        quant * (2.0 - int8_weight_bytes(4096)), rel=1e-9)
    assert q8.time.step_s > lora.time.step_s          # dequantized per GEMM pass


def test_adapter_activations_by_hand():
    """Per token and layer: r per adapted matrix (A's output) in the compute dtype; under
    torch.amp with fp32 adapters lora_A keeps its own bf16 copy of its input (2 d_in)."""
    dec = get_model("llama-3-8b").decoder
    assert adapter_kept_bytes_per_token(dec, 16, ("q", "v")) == 2 * 2.0 * 16
    assert adapter_kept_bytes_per_token(dec, 16, ("q", "v"), amp=True) == \
        2 * 2.0 * 16 + 2.0 * (4096 + 4096)
    # the Megatron path: rank 64 keeps 48 more elements per matrix and token than rank 16
    kw = dict(gpu="h100", gpus=1, seq_len=2048, global_batch=8, trainable="lora",
              framework="megatron", strategy={"micro_batch": 1, "recompute": "selective"})
    lo, hi = estimate("llama-3-8b", lora_rank=16, **kw), estimate("llama-3-8b", lora_rank=64, **kw)
    kept = (hi.memory.activations_gib - lo.memory.activations_gib) * GiB
    assert kept == pytest.approx(32 * 2048 * 7 * 48 * 2.0, rel=1e-9)


def test_torchtune_chunked_loss():
    """torchtune's CEWithChunkedOutputLoss (8 chunks): one chunk's fp32 upcast and one chunk's
    backward working set at a time, where transformers' loss holds the whole logits' (8V per
    token at the loss backward: hf_step.hf_loss_backward_bytes)."""
    dec = get_model("llama-3-8b").decoder
    kw = dict(gpu="h100", gpus=1, seq_len=2048, global_batch=1, trainable="lora",
              precision="bf16_pure", strategy={"micro_batch": 1, "recompute": "full"})
    T, V = 2048, dec.vocab
    hf = estimate("llama-3-8b", framework="pytorch", **kw).memory
    tt = estimate("llama-3-8b", framework="torchtune", **kw).memory
    assert hf.peak_phase == "loss backward" and hf.transient_gib * GiB == 8.0 * V * T
    assert tt.peak_phase == "end of forward"
    assert tt.transient_gib * GiB == 2.0 * V * T + 4.0 * V * T / 8
    assert tt.total_gib < hf.total_gib
