"""LoRA's memory counts against real tensors on CPU: a tiny transformers Llama loaded in bf16
with PEFT-style adapters (fp32, ``_cast_input_dtype``, ``lora_B(lora_A(x)) * scaling`` added to
the base output, as huggingface/peft tuners/lora/layer.py ``Linear.forward`` runs them), traced
by ``trainplan.measure.memtrace`` under bf16 autocast."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainplan import estimate  # noqa: E402
from trainplan.conventions import GiB  # noqa: E402
from trainplan.costmodel.lora import adapter_kept_bytes_per_token  # noqa: E402
from trainplan.costmodel.params import lora_params  # noqa: E402
from trainplan.measure.build import build_model, make_batch  # noqa: E402
from trainplan.measure.memtrace import MemTrace  # noqa: E402
from trainplan.spec.model import Model, Stack  # noqa: E402

pytestmark = pytest.mark.torch

MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
           "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
           "down": "mlp.down_proj"}


class PeftLikeLinear(torch.nn.Module):
    """PEFT's LoRA ``Linear`` reduced to its forward: frozen base, fp32 A and B (PEFT's
    ``autocast_adapter_dtype=True``), the input cast to the adapter dtype when it differs
    (``_cast_input_dtype``), dropout the identity (``lora_dropout=0``)."""

    def __init__(self, base, r: int):
        super().__init__()
        self.base_layer = base
        self.lora_A = torch.nn.Linear(base.in_features, r, bias=False, dtype=torch.float32)
        self.lora_B = torch.nn.Linear(r, base.out_features, bias=False, dtype=torch.float32)
        torch.nn.init.zeros_(self.lora_B.weight)
        self.scaling = 2.0

    def forward(self, x):
        result = self.base_layer(x)
        a = x if x.dtype == self.lora_A.weight.dtype else x.to(self.lora_A.weight.dtype)
        return result + self.lora_B(self.lora_A(a)) * self.scaling


def tiny():
    return Model(name="tiny-llama", stacks=(Stack(layers=2, hidden=128, heads=4, kv_heads=2,
                                                  ffn_hidden=344, vocab=512),))


def _peft(model, targets, r, seq):
    hf = build_model(model, seq, "sdpa", dtype=torch.bfloat16)
    for p in hf.parameters():
        p.requires_grad_(False)
    for layer in hf.model.layers:
        for t in targets:
            parent_name, name = MODULES[t].split(".")
            parent = getattr(layer, parent_name)
            setattr(parent, name, PeftLikeLinear(getattr(parent, name), r))
    return hf


def _end_of_forward(model, targets, r=8, seq=64, mb=2):
    torch.manual_seed(0)
    hf = _peft(model, targets, r, seq)
    batch = make_batch(model, hf, seq, mb)
    tr = MemTrace()
    tr.register_module(hf)
    tr.register(batch.values(), "inputs")
    with tr:
        with tr.phase("forward"), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = hf(**batch)
            loss = out.loss
        snap = tr.snapshot("end of forward").as_dict()
        del out, loss
    params = sum(p.numel() * p.element_size() for p in hf.parameters())
    return snap, params


def test_parameter_bytes_equal_the_prediction():
    """The bf16 base (2 B per parameter) and the fp32 adapters (4 B) of the traced model are
    the estimate's weights, byte for byte."""
    m = tiny()
    _, params = _end_of_forward(m, ("q", "k", "v", "o", "gate", "up", "down"))
    e = estimate(m, gpu="h100", gpus=1, seq_len=64, global_batch=2, trainable="lora",
                 lora_rank=8, framework="pytorch", strategy={"micro_batch": 2})
    assert e.memory.weights_gib * GiB == pytest.approx(params, rel=1e-12)


@pytest.mark.parametrize("targets", [("q", "k", "v", "o"), ("gate", "up", "down"), ("v", "o")])
def test_adapter_activations_equal_the_prediction(targets):
    """What all-linear adapters keep for the backward beyond those of fewer targets, at the end
    of the forward: the per-token count of ``adapter_kept_bytes_per_token`` (r per matrix, and
    lora_A's own bf16 copy of its input), byte for byte."""
    m, r, seq, mb = tiny(), 8, 64, 2
    every = ("q", "k", "v", "o", "gate", "up", "down")
    t_few = tuple(t for t in every if t in set(targets) | {"q"})
    few, _ = _end_of_forward(m, t_few, r, seq, mb)
    all_, _ = _end_of_forward(m, every, r, seq, mb)
    dec = m.decoder
    per_tok = adapter_kept_bytes_per_token(dec, r, every, amp=True) \
        - adapter_kept_bytes_per_token(dec, r, t_few, amp=True)
    assert all_["activations"] - few["activations"] == seq * mb * dec.layers * per_tok


def test_autocast_copies_of_the_adapters():
    """Autocast's bf16 copy of each fp32 adapter weight, 2 B per adapter parameter (the
    hf_stage_memory count): the MLP's adapters, all-linear against attention only."""
    m, r = tiny(), 8
    few, _ = _end_of_forward(m, ("q", "k", "v", "o"), r)
    all_, _ = _end_of_forward(m, ("q", "k", "v", "o", "gate", "up", "down"), r)
    assert all_["autocast_casts"] - few["autocast_casts"] == 2.0 * lora_params(
        m.decoder, r, ("gate", "up", "down"))
