"""The memory margin a plan keeps free (conventions.default_headroom_gib, job.headroom_gib):
shown by every estimate, never chosen into by plan."""

from __future__ import annotations

import pytest

from trainplan import estimate, plan
from trainplan.conventions import HEADROOM_FIXED_GIB, HEADROOM_SHARE, default_headroom_gib
from trainplan.errors import InputError
from trainplan.spec.framework import get_framework


def test_default_margin_is_a_share_plus_the_uncounted_context():
    """7% of the GPU's memory plus what of 1 GiB the profile's fixed_gib does not count."""
    assert (HEADROOM_SHARE, HEADROOM_FIXED_GIB) == (0.07, 1.0)
    assert default_headroom_gib(80.0) == pytest.approx(0.07 * 80.0 + 1.0)
    assert default_headroom_gib(80.0, get_framework("megatron").fixed_gib) == pytest.approx(5.6)
    assert default_headroom_gib(24.0, get_framework("pytorch").fixed_gib) == pytest.approx(2.68)


def test_every_estimate_carries_its_margin():
    e = estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=4096, global_batch=64)
    assert e.memory.margin_gib == pytest.approx(default_headroom_gib(79.65, 1.0))
    assert e.memory.fits_margin == (e.memory.total_gib <= 79.65 - e.memory.margin_gib)
    d = e.model_dump()
    assert {"margin_gib", "fits_margin"} <= set(d["memory"])
    own = estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=4096, global_batch=64,
                   headroom_gib=0.0)
    assert own.memory.margin_gib == 0.0 and own.memory.fits_margin == own.memory.fits


def test_an_estimate_inside_the_margin_says_so():
    """A layout that fits with less room than the margin: fits, not fits_margin, a warning."""
    base = dict(gpu="h100", gpus=1, seq_len=4096, global_batch=8, trainable="lora",
                framework="pytorch", strategy={"micro_batch": 1})
    e = estimate("llama-3-8b", **base)
    free = e.memory.headroom_gib
    tight = estimate("llama-3-8b", headroom_gib=free + 1.0, **base)
    assert tight.memory.fits and not tight.memory.fits_margin
    assert any("inside the memory margin" in w for w in tight.warnings)


def test_plan_never_picks_a_layout_inside_the_margin():
    r = plan("llama-3-8b", gpu="h100", gpus=1, seq_len=4096, global_batch=8, trainable="lora",
             top=5)
    for est in r.top:
        assert est.memory.total_gib <= est.memory.capacity_gib - est.memory.margin_gib
    # a margin no layout leaves is refused, naming the field
    with pytest.raises(InputError, match="headroom_gib"):
        plan("llama-3-8b", gpu="h100", gpus=1, seq_len=4096, global_batch=8,
             trainable="lora", headroom_gib=70.0)


def test_bad_margin_is_an_input_error():
    with pytest.raises(InputError, match="headroom_gib"):
        estimate("llama-3-8b", gpu="h100", gpus=1, headroom_gib=-1.0)


@pytest.mark.parametrize("gpu,model,kw", [
    ("rtx_4090", "llama-3-8b", {}),
    ("l40s", "llama-3-8b", {}),
    ("h100", "llama-3-8b", {}),
    ("h100", "llama-3-70b", {"base_weights": "nf4"}),
])
def test_finetunes_fit_one_gpu_at_the_defaults(gpu, model, kw):
    """#39: 8B LoRA on one 24, 48 and 80 GB GPU and 70B QLoRA on one 80 GB GPU fit with the
    default margin (2K tokens, the framework a LoRA job gets, plan's own layout)."""
    r = plan(model, gpu=gpu, gpus=1, seq_len=2048, global_batch=16, trainable="lora", top=1,
             **kw)
    w = r.top[0].memory
    assert w.fits_margin and w.total_gib <= w.capacity_gib - w.margin_gib


def test_plan_margin_reaches_its_estimates():
    r = plan("llama-3-8b", gpu="h100", gpus=1, seq_len=2048, global_batch=8, trainable="lora",
             headroom_gib=10.0, top=2)
    assert all(e.memory.margin_gib == 10.0 and e.memory.total_gib <= 79.65 - 10.0 for e in r.top)
