"""Catalog exactness: trainplan's parameter and FLOP counts against transformers.

For every preset of the catalog and for every supported text ``model_type`` (transformers'
default config of that family), build the transformers model on the meta device and compare
(trainplan.measure.reference):

* parameters, total and MoE-active per token: must be equal;
* weight-matmul FLOPs of one training step (forward + backward, FlopCounterMode on meta tensors,
  on a reduced layer count): |difference| <= 1%;
* attention-score FLOPs, separately: eager attention computes the full masked s x s products,
  which trainplan's non-causal, unwindowed count must match; the causal/windowed count trainplan
  uses for model FLOPs is shown beside it (share of the kernel's work).

trainplan-format GPT presets are compared through a GPT-2 config of the same shapes.
Vision-language presets are compared in a second section (``catalog_exactness_vision.py``:
every part's parameters, and the tower and projector FLOPs); the total counts both sections.

Every config is traced with its windows and chunks shrunk to 32 tokens (no parameter changes)
at a sequence at least twice the longest window, chunk or scan chunk (``family_variants.
exercised``), so sliding, chunked and linear-attention patterns run over several windows; the
newer families are also compared as shrunk variants of their default configs
(``family_variants.VARIANTS``), and the refused ``model_type``s are listed with the part each
lacks. The closing lines give the count per ``model_type`` and the accepted configs whose
parameter counts differ from transformers' (the acceptance line: 0).

Run: python benchmarks/catalog_exactness.py [--seq 64] [--filter SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from trainplan.measure import reference as ref
from trainplan.catalog.hf import TEXT_TYPES
from trainplan.catalog.hf_families import REFUSED
from trainplan.catalog.models import _index, get_model
from trainplan.errors import InputError


def _row(label: str, mt: str, c) -> str:
    share = c.attention_model / c.attention_kernel if c.attention_kernel else 0.0
    return (f"{label:24s} {mt:12s} {c.params:>17,} {c.params_ref:>17,} {c.active:>16,} "
            f"{c.active_ref:>16,} {c.matmul_diff:>+8.3%} {c.attention_diff:>+8.3%} "
            f"{share:>6.1%} {'PASS' if c.passed else 'FAIL'}")


def _compare(cfg: dict, label: str, seq: int):
    """compare_config on the exercised copy of ``cfg`` (windows shrunk, sequence >= 2x the
    longest window or chunk, and at least ``seq``)."""
    small, need = ref.exercised(cfg, seq)
    return ref.compare_config(small, label, seq=need)


def _variants(a, tally) -> tuple[int, int, int]:
    """The shrunk variants of the newer families (family_variants.VARIANTS)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from family_variants import VARIANTS, variant_config
    passed = failed = skipped = 0
    for label, mt, over in VARIANTS:
        if a.filter and a.filter not in label:
            continue
        try:
            cfg = variant_config(ref.default_config(mt), over)
            c = _compare(cfg, label, a.seq)
        except Exception as e:    # transformers refuses the config (printed, not compared)
            print(f"{label:24s} {mt:12s} not compared: {type(e).__name__}: {str(e)[:90]}")
            skipped += 1
            continue
        print(_row(label, mt, c), flush=True)
        tally.append((mt, c))
        passed += c.passed
        failed += not c.passed
    return passed, failed, skipped


def _summary(tally) -> None:
    """Per model_type: configs compared and passed; and the accepted configs with a wrong
    parameter count."""
    by: dict[str, list[int]] = {}
    for mt, c in tally:
        n = by.setdefault(mt, [0, 0])
        n[0] += 1
        n[1] += c.passed
    print()
    print("per model_type (compared/passed): " + ", ".join(
        f"{mt} {n}/{p}" for mt, (n, p) in sorted(by.items())))
    wrong = sum(1 for _, c in tally if c.params != c.params_ref or c.active != c.active_ref)
    print(f"{len(tally)} text configs over {len(by)} model_types; {wrong} accepted with a "
          f"wrong count")
    print(f"refused by model_type ({len(REFUSED)}): " + "; ".join(
        f"{mt}: {why}" for mt, why in sorted(REFUSED.items())))


def _vision_section() -> tuple[int, int]:
    """The vision-language rows, from the sibling script (run with its own path on sys.path)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import catalog_exactness_vision
    return catalog_exactness_vision.run()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=64, help="traced sequence length")
    ap.add_argument("--filter", default="", help="only ids containing this")
    a = ap.parse_args()
    head = (f"{'model':24s} {'model_type':12s} {'params trainplan':>17s} {'params transformers':>17s} "
            f"{'active trainplan':>16s} {'active transf.':>16s} {'matmul':>8s} {'attn':>8s} "
            f"{'causal':>6s} result")
    print(head)
    print("-" * len(head))
    passed = failed = skipped = 0
    tally: list = []
    t0 = time.perf_counter()
    rows = [(k, r) for k, r in sorted(_index().items()) if a.filter in k]
    for key, rec in rows:
        model = get_model(key)
        if model.vision:
            continue   # the vision-language section below
        if rec.get("format", "hf") == "hf":
            c = _compare(rec["config"], key, a.seq)
            mt = str(rec["config"].get("model_type"))
        else:
            cfg = ref.gpt2_config_from_stack(model.decoder)
            if cfg is None:
                print(f"{key:24s} {'(trainplan)':12s} no transformers equivalent of its stack")
                skipped += 1
                continue
            c = ref.compare_config(cfg, key, seq=a.seq)
            mt = "gpt2 (shape)"
        print(_row(key, mt, c), flush=True)
        tally.append((mt, c))
        passed += c.passed
        failed += not c.passed
    for mt in TEXT_TYPES:
        if a.filter and a.filter not in mt:
            continue
        try:
            c = _compare(ref.default_config(mt), f"default:{mt}", a.seq)
        except InputError as e:   # a default config that is not a model (a null size)
            print(f"{'default ' + mt:24s} {mt:12s} not compared: transformers' default config "
                  f"is incomplete ({e})")
            skipped += 1
            continue
        except (TypeError, ValueError) as e:   # transformers cannot build its own default
            print(f"{'default ' + mt:24s} {mt:12s} not compared: transformers cannot build "
                  f"its default config ({type(e).__name__}: {str(e)[:80]})")
            skipped += 1
            continue
        print(_row(f"default {mt}", mt, c), flush=True)
        tally.append((mt, c))
        passed += c.passed
        failed += not c.passed
    vp, vf, vs = _variants(a, tally)
    passed, failed, skipped = passed + vp, failed + vf, skipped + vs
    print("-" * len(head))
    print(f"text: {passed + failed} compared, {passed} PASS, {failed} FAIL, {skipped} not compared")
    _summary(tally)
    if not a.filter:
        print()
        vis_n, vis_bad = _vision_section()
        passed += vis_n - vis_bad
        failed += vis_bad
    print(f"total: {passed + failed} compared, {passed} PASS, {failed} FAIL, {skipped} not "
          f"compared; seq {a.seq}; {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
