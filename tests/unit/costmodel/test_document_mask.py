"""Packed sequences with a document mask (Job.document_tokens): fused attention spans each
document, not the sequence. Checked against the mask itself (a block-causal boolean matrix built
from packed lengths) and against the same tokens trained as separate sequences."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan import InputError, estimate
from trainplan.data.packing import document_span
from trainplan.data.padding import analyze
from trainplan.spec.job import Job

KW = dict(gpu="h100_sxm", gpus=8, precision="bf16_mixed", framework="megatron")


def _block_causal_keys_per_query(lengths) -> float:
    """Mean allowed keys per query of the block-causal mask of documents packed back to back."""
    doc = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(doc.size)
    allowed = (doc[:, None] == doc[None, :]) & (pos[None, :] <= pos[:, None])
    return float(allowed.sum() / doc.size)


@pytest.mark.parametrize("lengths", [[512] * 8, [3, 700, 41, 1200, 90, 2000, 60], [4096]])
def test_document_span_gives_the_masks_keys_per_query(lengths):
    span = document_span(lengths, capacity=4096)
    assert (span + 1.0) / 2.0 == pytest.approx(_block_causal_keys_per_query(lengths), rel=1e-12)


def test_document_span_cuts_documents_at_the_sequence_length():
    assert document_span([10_000, 100], capacity=1000) == pytest.approx((1000**2 + 100**2) / 1100)


def test_data_lengths_reports_the_span_it_recommends():
    rep = analyze([100, 300, 3000, 50] * 50, capacity=4096)
    assert rep.document_tokens == pytest.approx(document_span([100, 300, 3000, 50], 4096))
    assert f"document_tokens = {rep.document_tokens:.1f}" in rep.recommendation


def _step(seq, docs, gb, mb, flash=True):
    return estimate("llama-3-8b", seq_len=seq, global_batch=gb, document_tokens=docs, **KW,
                    strategy={"tp": 1, "zero": 1, "micro_batch": mb, "flash_attention": flash})


def test_packed_documents_cost_what_separate_sequences_of_their_length_cost():
    """8 sequences of 8,192 tokens, each 8 documents of 1,024 under a document mask, are 64
    sequences of 1,024 for the attention core: the same FLOPs and, with the same tokens per
    micro-batch, the same compute time."""
    packed, separate = _step(8192, 1024, 8, 1), _step(1024, None, 64, 8)
    assert packed.model_flops_per_step == pytest.approx(separate.model_flops_per_step, rel=1e-12)
    assert packed.time.compute_s == pytest.approx(separate.time.compute_s, rel=1e-9)
    whole = _step(8192, None, 8, 1)
    assert whole.time.compute_s > 1.1 * packed.time.compute_s      # the mask's saving is real


def test_eager_attention_computes_the_whole_score_matrix_under_a_mask():
    assert _step(4096, 512, 8, 1, flash=False).time.compute_s == pytest.approx(
        _step(4096, None, 8, 1, flash=False).time.compute_s, rel=1e-12)


def test_a_document_longer_than_the_sequence_or_shorter_than_a_token_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="document_tokens"):
        Job(seq_len=4096, global_batch=8, document_tokens=5000)
    with pytest.raises(ValueError, match="document_tokens"):
        Job(seq_len=4096, global_batch=8, document_tokens=0.5)
    with pytest.raises(InputError, match="document_tokens"):
        _step(4096, 5000, 8, 1)
