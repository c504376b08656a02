"""The sources' FLOPs conventions used to compare TFLOP/s rows (validation/framework_runs.py)."""

from __future__ import annotations

import pytest

from trainplan.catalog import get_model
from trainplan.costmodel import flops as fl
from trainplan.validation import framework_runs as fr


@pytest.mark.parametrize("seq", [8192, 262144])
def test_arctic_counter_is_three_causal_forward_passes(seq):
    """ml-engineering's counter (6*dense_N*tokens + 6*s^2*a*d*L) is forward + backward of the
    weight matmuls, LM head and causal attention: it must agree with the op inventory's own
    causal forward count x 3 (they differ only by s/2 vs (s+1)/2 keys per query)."""
    d = get_model("llama-3-8b").decoder
    ours = fl.arctic_causal_model_flops(1, seq, d.layers, d.hidden, d.heads, d.kv_heads,
                                        d.hidden // d.heads, d.ffn_hidden, d.vocab)
    inventory = fl.TRAIN_MULTIPLIER * fl.stack_forward_flops_per_token(d, seq, causal=True) * seq
    assert ours == pytest.approx(inventory, rel=1e-4)


def test_step_time_records_compare_as_tokens_per_gpu():
    """A record that reports only a step time is compared in tokens/s per GPU of its batch."""
    rec = {"reported": {"step_s": 0.5}, "global_batch": 4, "seq_len": 512, "gpus": 4}
    value, unit = fr.reported(rec)
    assert unit == "tok/s/GPU" and value == pytest.approx(4 * 512 / 0.5 / 4)
