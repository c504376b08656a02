"""Tables of the catalog commands: ``models``, ``gpus``, ``frameworks``, ``conventions``."""

from __future__ import annotations

from typing import Any, Sequence

from trainplan.report.echo import console, line
from trainplan.report.fmt import cut, num
from trainplan.report.tables import print_rows


def _billions(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def render_models(rows: Sequence[dict[str, Any]]) -> None:
    print_rows("Model presets", ("id", "family", "params", "active", "context", "attention", "source"),
               [(r["id"], r["family"] + (" +vision" if r["vision"] else ""), _billions(r["params"]),
                 _billions(r["active"]) if r["active"] != r["params"] else "=",
                 f"{r['context_length']:,}" if r["context_length"] else "-", r["attention"],
                 cut(r["source"] or "", 28)) for r in rows],
               right=("params", "active", "context"))


def render_gpus(accs: Sequence[Any]) -> None:
    print_rows("Accelerators (dense peak TFLOP/s)",
               ("id", "name", "bf16", "fp8", "HBM GiB", "HBM TB/s", "link GB/s", "NIC Gb/s", "TDP W", "$/GPU-h"),
               [(a.id, a.name, num(a.peak_tflops.get("bf16", a.peak_tflops.get("fp16", 0)), "g"),
                 num(a.peak_tflops.get("fp8") or None, "g"), num(a.hbm_gib, "g"), num(a.hbm_bw_tbps, "g"),
                 num(a.intra_node_GBps, "g"), num(a.inter_node_Gbps, "g"), num(a.tdp_w, "g"),
                 num(a.usd_per_gpu_hour or None, "g")) for a in accs])


def render_frameworks(fws: Sequence[Any]) -> None:
    c = console()
    print_rows("Framework profiles (layouts each can run)",
               ("id", "ZeRO", "ZeRO w/ PP", "TP", "PP", "CP", "EP", "recompute", "FP8", "fused ops",
                "activation offload", "validated: runs, median / worst |error|"),
               [(f.id, ",".join(map(str, f.zero_stages)),
                 "-" if f.max_pp == 1 else f"<={f.max_zero_with_pp}",
                 *("no" if m == 1 else "yes" for m in (f.max_tp, f.max_pp)),
                 "no" if f.max_cp == 1 else ",".join(f.offered_cp()),     # the exchanges offered
                 "no" if f.max_ep == 1 else "yes",
                 ",".join(f.recompute),
                 "yes" if f.fp8_linear else "no", str(len(f.fused)), _act_offload(f),
                 _validated(f))
                for f in fws], console=c)
    for f in fws:
        line(f"{f.id}: {f.name}", c=c)


def _validated(f: Any) -> str:
    """The profile's family figures on published runs (costmodel/accuracy.py)."""
    from trainplan.costmodel.accuracy import family_figures
    fig = family_figures(f.family)
    if fig is None:
        return "no"
    return f"{f.family}: {fig['n']}, {fig['median_abs']:.1%} / {fig['max_abs']:.1%}"


def _act_offload(f: Any) -> str:
    """What a profile's activation offloading moves and what it runs with."""
    if f.activation_offload == "none":
        return "no"
    what = "< layers" if f.activation_offload == "layers" else "every layer"
    pp = f", pp<={f.activation_offload_max_pp}" if f.activation_offload_max_pp else ""
    return f"{what} (recompute {','.join(f.activation_offload_recompute)}{pp})"


def render_conventions(table: dict[str, dict[str, Any]]) -> None:
    c = console()
    print_rows("Model-state bytes per parameter (before ZeRO sharding)",
               ("precision", "optimizer", "weights", "grads", "master", "optimizer", "total"),
               [(p, opt, *(num(x, "g") for x in (b.weights, b.grads, b.master, b.optim, b.total)))
                for p, row in table.items() for opt, b in row.items()], console=c, key_columns=2)
    line("MFU = model FLOPs (no recompute, causal attention, LM head) / (step time x GPUs x dense peak).\n"
         "HFU adds recompute FLOPs. 6ND is shown beside them. Memory in GiB (2^30 B), bandwidth in GB/s.", c=c)
