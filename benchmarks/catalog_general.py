"""The general import path (``trainplan.catalog.meta_import``) over transformers' auto mappings.

For every ``model_type`` of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` and
``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES`` whose default config (``CONFIG_MAPPING[mt]()``)
transformers builds on the meta device (``AutoModelForCausalLM`` / ``AutoModelForImageTextToText``,
eager attention), the general path reads the built model and prints one row:

* **exact**: trainplan's total and MoE-active parameters equal the model's (sum of ``numel``;
  active: the routed experts' tensors scaled by top_k / E), and one training step's FLOPs
  (forward + backward, weight matmuls plus the full masked attention scores that eager attention
  computes) are within 1% of ``torch.utils.flop_counter.FlopCounterMode`` on a forward and
  backward of a shrunk config (``--layers`` layers, ``--seq`` tokens; run on meta tensors, which
  count the same shapes as a CPU run at no cost; MoE experts as ``batched_mm``);
* **WRONG**: accepted with a count that differs (the acceptance wants none);
* **refused**: the InputError naming the module class and path;
* **no trace**: exact parameters, but the FLOP trace could not run on meta tensors.

Then the refused list and the refused fraction (acceptance: below 10% of the types that build).

Run: python benchmarks/catalog_general.py [--filter SUBSTRING] [--seq 64] [--layers 4] [--jobs N]
"""

from __future__ import annotations

import argparse
import re
import time
import warnings

_EXPERTS = re.compile(r"(^|\.)experts\.")


def _build(auto, conf, torch):
    with torch.device("meta"):
        try:
            return auto.from_config(conf, attn_implementation="eager",
                                    experts_implementation="batched_mm")
        except (TypeError, ValueError):
            return auto.from_config(conf, attn_implementation="eager")


def _shrunk(mt, conf, layers):
    """The default config with ``layers`` decoder layers (per-layer lists cut to match)."""
    from transformers import CONFIG_MAPPING
    d = conf.to_dict()
    kw = {}
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(d.get(key), int):
            kw[key] = min(d[key], layers)
    if isinstance(d.get("layer_types"), list):
        kw["layer_types"] = d["layer_types"][:layers]
    if isinstance(d.get("mlp_only_layers"), list):
        kw["mlp_only_layers"] = [i for i in d["mlp_only_layers"] if i < layers]
    return CONFIG_MAPPING[mt](**kw)


def _trace(model, seq, torch):
    from torch.utils.flop_counter import FlopCounterMode
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as fwd:
        out = model(input_ids=ids, labels=ids, use_cache=True)
    with FlopCounterMode(display=False) as bwd:
        out.loss.backward()
    return fwd.get_total_flops() + bwd.get_total_flops()


def _flops(model, seq):
    """trainplan's step FLOPs (forward + backward) of a model as eager attention computes it."""
    from trainplan.costmodel import flops as fl
    dec = model.decoder
    per_token = fl.matmul_forward_flops_per_token(dec) + dec.layers * float(
        fl.attention_core_flops_per_token(dec, seq, causal=False, window=False))
    return 3.0 * seq * per_token


def _hand_written(mt, conf, built) -> str:
    """What the hand-written importer of a type the general path refuses makes of the same
    default config: its total parameters against the built model's ("" if it has none)."""
    from trainplan.catalog.hf import TEXT_TYPES
    from trainplan.catalog.hf_config import model_from_hf_config
    from trainplan.catalog.vision import VISION_IMPORTERS
    from trainplan.costmodel.params import model_params
    if mt not in TEXT_TYPES and mt not in VISION_IMPORTERS:
        return ""
    d = conf.to_dict()
    d["model_type"] = mt
    try:
        total = model_params(model_from_hf_config(d, mt)).total
    except Exception as e:  # noqa: BLE001
        return f"; hand-written importer: refuses ({str(e)[:60]})"
    ref = sum(p.numel() for p in built.parameters())
    return f"; hand-written importer: {'exact' if total == ref else 'WRONG'} ({total:,} vs {ref:,})"


def check(mt, auto, seq, layers, torch):
    """(status, detail) of one model_type."""
    from transformers import CONFIG_MAPPING
    from trainplan.catalog.meta_import import model_from_module
    from trainplan.costmodel.params import model_params
    from trainplan.errors import InputError
    try:
        conf = CONFIG_MAPPING[mt]()
        built = _build(auto, conf, torch)
    except Exception as e:  # noqa: BLE001 - a default config transformers does not build
        return "no build", f"{type(e).__name__}: {str(e)[:80]}"
    try:
        model = model_from_module(built, conf, mt)
    except InputError as e:
        return "refused", f"{e.value} (wanted: {e.valid[:90]})" + _hand_written(mt, conf, built)
    except Exception as e:  # noqa: BLE001 - a defect of the general path: shown, counted
        return "ERROR", f"{type(e).__name__}: {str(e)[:100]}"
    p = model_params(model)
    moe = model.decoder.moe
    total = inactive = 0
    for name, t in built.named_parameters():
        total += t.numel()
        if moe and _EXPERTS.search(name):
            inactive += t.numel() * (moe.num_experts - moe.top_k) // moe.num_experts
    if p.total != total or p.active != total - inactive:
        return "WRONG", f"params {p.total:,} vs {total:,}, active {p.active:,} vs {total - inactive:,}"
    try:
        sconf = _shrunk(mt, conf, layers)
        small = _build(auto, sconf, torch)
        ref = _trace(small, seq, torch)
        mine = _flops(model_from_module(small, sconf, mt), seq)
    except Exception as e:  # noqa: BLE001 - a forward meta tensors cannot run
        return "no trace", f"params exact {total:,}; {type(e).__name__}: {str(e)[:70]}"
    diff = (mine - ref) / ref
    if abs(diff) > 0.01:
        return "WRONG", f"params exact {total:,}; FLOPs {diff:+.2%} ({mine:.4g} vs {ref:.4g})"
    return "exact", f"params {total:,}; FLOPs {diff:+.3%}"


def _one(args):
    """(model_type, status, detail), in a worker process."""
    import torch
    import transformers as tf
    mt, auto, seq, layers = args
    warnings.filterwarnings("ignore")
    tf.logging.set_verbosity_error()
    return (mt,) + check(mt, getattr(tf, auto), seq, layers, torch)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (fork)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    import transformers as tf
    from transformers.models.auto import modeling_auto as ma
    tf.logging.set_verbosity_error()
    todo = [(mt, tf.AutoModelForCausalLM) for mt in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES]
    todo += [(mt, tf.AutoModelForImageTextToText) for mt in ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
             if mt not in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES]
    t0 = time.perf_counter()
    todo = [(mt, auto.__name__) for mt, auto in todo if a.filter in mt]
    rows = []
    if a.jobs > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(a.jobs) as pool:
            done = pool.imap(_one, [(mt, name, a.seq, a.layers) for mt, name in todo])
            for row in done:
                rows.append(row)
                print(f"{row[0]:32s} {row[1]:9s} {row[2]}", flush=True)
    else:
        for mt, name in todo:
            rows.append(_one((mt, name, a.seq, a.layers)))
            print(f"{rows[-1][0]:32s} {rows[-1][1]:9s} {rows[-1][2]}", flush=True)
    built = [r for r in rows if r[1] != "no build"]
    refused = [r for r in rows if r[1] == "refused"]
    count = {s: sum(1 for r in rows if r[1] == s) for s in ("exact", "WRONG", "refused", "no trace",
                                                            "no build", "ERROR")}
    hand = [r[0] for r in refused if "hand-written importer: exact" in r[2]]
    print()
    print("refused: " + ", ".join(r[0] for r in refused))
    print(f"of them exact through a hand-written importer ({len(hand)}): " + ", ".join(hand))
    print(f"{len(rows)} model_types; {len(built)} build on meta: {count['exact']} exact, "
          f"{count['WRONG']} WRONG, {count['no trace']} exact parameters without a FLOP trace, "
          f"{count['ERROR']} ERROR, {count['refused']} refused ({count['refused'] / max(len(built), 1):.1%} of those that "
          f"build); {count['no build']} do not build; {time.perf_counter() - t0:.0f} s")
    return 1 if count["WRONG"] or count["ERROR"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
