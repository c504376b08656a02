"""NeMo performance-summary records follow what the release's own performance scripts set.

Read at the stated versions (evidence in each record's 'assumptions' and in SOURCES.md,
"Memory of the NeMo performance-summary rows"): NVIDIA/NeMo v2.3.0 (container 25.04) and v2.4.0
(25.07) set ``cross_entropy_fusion_impl = "te"`` in every pretrain performance script; v2.2.x
(25.02) does not. Their ``model_configs_gb200.csv`` row for Llama 3 70B FP8 is the page's layout
(64 GPUs, TP/PP/CP/VP 1, MBS 1, GBS 128, Megatron-FSDP) with no recompute and no offloading.
"""

from __future__ import annotations

from trainplan.validation import framework_runs as fr

_TE_SETS = {"nemo-perf-summary-25.04", "nemo-perf-summary-25.07"}
_PINNED = {"nemo2504-llama3-70b-gb200-64g-fp8", "nemo2507-llama3-70b-gb200-64g-fp8"}


def test_loss_dtype_follows_each_release_scripts():
    seen = set()
    for rec in fr.load():
        s = rec.get("set", "")
        if not s.startswith("nemo-perf-summary-"):
            continue
        keeps_fp32 = (rec.get("job") or {}).get("logits_fp32", True)
        assert keeps_fp32 is (s not in _TE_SETS), rec["id"]
        seen.add(s)
    assert _TE_SETS <= seen and "nemo-perf-summary-25.02" in seen


def test_layouts_pinned_by_the_release_config_are_checked_and_fit():
    recs = {r["id"]: r for r in fr.load()}
    for rid in _PINNED:
        rec = recs[rid]
        lay = rec["layout"]
        assert "memory_check" not in rec
        assert (rec["gpus"], rec["global_batch"], rec["micro_batch"]) == (64, 128, 1)
        assert (lay["tp"], lay["pp"], lay["cp"], lay["vp"], lay["zero"]) == (1, 1, 1, 1, 3)
        assert lay["recompute"] == "none" and not lay.get("activation_offload_layers")
        assert fr.predict(rec)["estimate"].memory.fits, rid
