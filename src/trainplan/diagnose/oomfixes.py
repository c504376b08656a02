"""The changes an out-of-memory run can make, as its framework offers them, ranked.

Each candidate is one change to the job, estimated by the same cost model as the plan
(``oomplan.predict``). A change *fits* when its predicted total plus the measured excess over the
plan stays under 95% of the capacity (``oomplan.FIT_SHARE``). Fitting changes are ranked by
(tier, predicted GPU-time per token relative to the failing job):

0. free: stop the other processes holding the GPU (their memory from the message);
1. the same arithmetic, another execution: micro-batch down with more accumulation, recompute,
   a higher ZeRO/FSDP stage, CPU offload, activation offload, FlashAttention, a fused/chunked
   cross-entropy, TP/PP where the framework runs them;
2. other numerics: an 8-bit optimizer, bf16 instead of fp32;
3. a different training: a shorter sequence, LoRA instead of a full fine-tune, a 4-bit base
   (QLoRA), the largest smaller preset of the model's family;
4. more GPUs.

When no change of tiers 1-2 fits alone, pairs of them (and with more GPUs) are tried too, so
that two exact changes rank before a different training. Which changes exist comes from the framework profile (``catalog/data/frameworks.json``: its ZeRO
stages, offload and activation-offload fields; TP/PP only where ``oomplan.candidates`` allows),
never from a name test here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

KIND_OF = (("activation offload", "activation_offload"), ("offload", "offload"),
           ("zero", "zero"), ("micro-batch", "micro_batch"), ("recompute", "recompute"),
           ("tp ", "tensor_parallel"), ("pp ", "pipeline_parallel"), ("GPUs", "more_gpus"))


def _kind(label: str) -> str:
    return next((k for word, k in KIND_OF if word in label), "other")


def job_changes(cfg: Any, fw: Any) -> list[tuple[str, str, int, Any]]:
    """(label, kind, tier, Config) for the changes outside the strategy's knobs."""
    st, job = cfg.strategy, cfg.job
    out: list[tuple[str, str, int, Any]] = []
    if st.get("flash_attention") is False:
        out.append(("FlashAttention (attn_implementation='flash_attention_2' / sdpa)",
                    "flash_attention", 1, replace(cfg, strategy={**st, "flash_attention": True})))
    if job.get("logits_fp32") is not False:
        fused = tuple(sorted(set(job.get("fused_ops") or ()) | {"linear_cross_entropy"}))
        out.append(("fused/chunked cross-entropy (no full fp32 logits: Liger, chunked loss)",
                    "fused_ce", 1, replace(cfg, job={**job, "fused_ops": fused})))
    if job.get("optimizer", "adamw") == "adamw" and job.get("trainable", "full") == "full":
        out.append(("8-bit AdamW (bitsandbytes adamw_8bit)", "optimizer_8bit", 2,
                    replace(cfg, job={**job, "optimizer": "adamw_8bit"})))
    if job.get("precision") == "fp32":
        out.append(("bf16 mixed precision instead of fp32", "precision", 2,
                    replace(cfg, job={**job, "precision": "bf16_mixed"})))
    if cfg.seq_len >= 256:
        out.append((f"sequence {cfg.seq_len} -> {cfg.seq_len // 2}", "seq_len", 3,
                    replace(cfg, seq_len=cfg.seq_len // 2)))
    if job.get("trainable", "full") == "full":
        out.append(("LoRA instead of a full fine-tune", "lora", 3,
                    replace(cfg, job={**job, "trainable": "lora"})))
    elif not job.get("base_weights"):
        out.append(("QLoRA: 4-bit (nf4) frozen base", "qlora", 3,
                    replace(cfg, job={**job, "base_weights": "nf4"})))
    small = smaller_model(cfg.model)
    if small:
        out.append((f"a smaller model of the family: {small}", "smaller_model", 3,
                    replace(cfg, model=small)))
    return out


@lru_cache(maxsize=1)
def _preset_rows() -> tuple[tuple[str, str, str, int, bool], ...]:
    from trainplan.services.models import model_rows
    return tuple((r["id"], str(r["name"]), r["family"], int(r["params"]), bool(r["vision"]))
                 for r in model_rows())


def smaller_model(model: Any) -> str | None:
    """The largest preset of the same family (config.json ``model_type``) with at most 3/4 of
    the parameters, for a model that is a preset; None otherwise."""
    name = model if isinstance(model, str) else getattr(model, "name", "")
    rows = _preset_rows()
    me = next((r for r in rows if name in (r[0], r[1])), None)
    if me is None:
        return None
    smaller = [r for r in rows if r[2] == me[2] and r[4] == me[4] and r[3] <= 0.75 * me[3]]
    return max(smaller, key=lambda r: r[3])[0] if smaller else None


def rank(cfg: Any, base_est: Any, excess: float, meas: Any, limit: int = 6) -> list[dict[str, Any]]:
    """Fitting changes, ranked (module docstring); the kill-other-processes row first when the
    message shows other processes holding the memory the request needed."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import resolve_gpu
    from trainplan.diagnose.oomcheck import held_elsewhere
    from trainplan.diagnose.oomplan import candidates
    from trainplan.spec.framework import get_framework
    fw = get_framework(cfg.implementation)
    model = get_model(cfg.model) if isinstance(cfg.model, str) else cfg.model
    base = replace(cfg, strategy={**base_est.strategy, "dp": None})
    tries = [(lab, _kind(lab), 4 if _kind(lab) == "more_gpus" else 1, replace(base, strategy=st), n)
             for lab, st, n in candidates(base.strategy, cfg.gpus, cfg.implementation == "megatron",
                                          fw.offload_together, fw, model.decoder.layers,
                                          resolve_gpu(cfg.gpu).gpus_per_node)]
    tries += [(lab, kind, tier, c, cfg.gpus) for lab, kind, tier, c in job_changes(base, fw)]
    cap = float(base_est.memory.capacity_gib)
    per_tok = float(base_est.time.step_s) * cfg.gpus / (cfg.global_batch * cfg.seq_len)
    base_step = float(base_est.time.step_s)
    rows = [r for r in (_row(t, excess, cap, per_tok, base_step) for t in tries) if r is not None]
    if not any(r["fits"] and r["tier"] <= 2 for r in rows):     # an exact pair before a new job
        exact = [t for t in tries if t[2] <= 2 or t[1] == "more_gpus"]
        rows += [r for r in (_row(t, excess, cap, per_tok, base_step) for t in pairs(exact)) if r is not None]
    if not any(r["fits"] for r in rows):                        # then any two changes
        done = {t[0] for t in pairs([t for t in tries if t[2] <= 2 or t[1] == "more_gpus"])}
        rest = [t for t in pairs(tries) if t[0] not in done]
        rows += [r for r in (_row(t, excess, cap, per_tok, base_step) for t in rest) if r is not None]
    rows = sorted((r for r in rows if r["fits"]), key=lambda r: (r["tier"], r["gpu_time_factor"]))
    other = meas.other_processes_gib
    if held_elsewhere(other, meas.capacity_gib, bool(meas.source and ">= 2.1" in meas.source)):
        rows.insert(0, {"change": f"stop the other processes on this GPU ({other:.2f} GiB; "
                                  "nvidia-smi lists them)", "kind": "kill_processes", "tier": 0,
                        "fits": True, "memory_gib": float(base_est.memory.total_gib),
                        "gpu_time_factor": 1.0, "freed_gib": other})
    return rows[:limit]


def pairs(tries: list[tuple[str, str, int, Any, int]]) -> list[tuple[str, str, int, Any, int]]:
    """Two changes of different kinds together (strategy and job merged), for when no single
    change fits; the pair takes the higher tier and the kind of its first change."""
    out = []
    for i, (l1, k1, t1, c1, n1) in enumerate(tries):
        for l2, k2, t2, c2, n2 in tries[i + 1:]:
            if k1 == k2:
                continue
            c = replace(c1, strategy={**c1.strategy, **c2.strategy} if k2 not in (
                "seq_len",) else c1.strategy, job={**c1.job, **c2.job},
                seq_len=min(c1.seq_len, c2.seq_len))
            out.append((f"{l1} + {l2}", k1, max(t1, t2), c, max(n1, n2)))
    return out


def _row(t: tuple[str, str, int, Any, int], excess: float, cap: float, per_tok: float,
         base_step: float) -> dict[str, Any] | None:
    from trainplan.diagnose.oomplan import FIT_SHARE, _clean, predict
    from trainplan.errors import TrainplanError
    label, kind, tier, c, n = t
    try:
        est = predict(c, _clean(c.strategy), n)
    except (TrainplanError, ValueError):
        return None
    total = float(est.memory.total_gib)
    tok = float(est.time.step_s) * n / (c.global_batch * c.seq_len)
    return {"change": label, "kind": kind, "tier": tier, "layout": est.layout,
            "memory_gib": total, "with_excess_gib": total + excess, "capacity_gib": cap,
            "fits": total + excess <= FIT_SHARE * cap, "step_s": float(est.time.step_s), "gpus": n,
            "slowdown": float(est.time.step_s) / base_step if base_step else float("nan"),
            "gpu_time_factor": tok / per_tok if per_tok else float("nan")}


def explain(meas: Any, cfg: Any, est: Any, comp: str, why: str) -> tuple[str, str]:
    """The component named from the plan, overruled by what the message itself shows: memory
    held by other processes, a failed request that is the logits or a copy of the weights
    (module ``oomcheck``)."""
    from trainplan.diagnose.oomcheck import held_elsewhere, logits_shape, weights_copy
    from trainplan.catalog import get_model
    model = get_model(cfg.model) if isinstance(cfg.model, str) else cfg.model
    lg = logits_shape(meas.requested_gib, int(est.strategy.get("micro_batch") or 1), cfg.seq_len,
                      int(model.decoder.vocab or 0))
    wc = weights_copy(meas.requested_gib, int(est.params_total), int(est.strategy.get("dp") or 1))
    if lg:
        comp, why = "activations", f"the failed request is the {lg}"
    elif wc:
        comp, why = "optimizer", f"the failed request is an {wc}"
    listed = bool(meas.source and ">= 2.1" in meas.source)
    if held_elsewhere(meas.other_processes_gib, meas.capacity_gib, listed):
        comp = "other processes"
        why = (f"{meas.other_processes_gib:.2f} GiB of the GPU is held outside this process's "
               "allocator (" + ("other processes)" if listed else
                                "other processes or a very large CUDA context)"))
    return comp, why
