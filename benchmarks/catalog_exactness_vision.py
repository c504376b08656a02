"""Vision-language presets against transformers: parameters and vision FLOPs per preset.

For every VLM preset in ``catalog/data/vision_models.json`` (and a few standalone towers):
trainplan's parameter counts (vision tower, projector, decoder, total) against the transformers
model built from the same config on the meta device, and the training FLOPs of one image through
the tower and projector against ``torch.utils.flop_counter.FlopCounterMode`` (forward + backward,
eager attention so QK^T and AV are bmm; the FLOPs are all matmul/conv/bmm).

Towers that need real index data run on the CPU with fewer layers and a small image (said in the
"run" column: layers x H x W); the others run whole at their own resolution on the meta device.
Qwen-VL (remote code) is not in transformers and is listed as not built.

Run: python benchmarks/catalog_exactness_vision.py   (needs the torch extra; about a minute)
"""

from __future__ import annotations

import sys
import time

from trainplan.measure import reference_vision as R
from trainplan.catalog.vision import vision_tower_from_hf
from trainplan.catalog.vlm import get_vlm_preset, vision_presets
from trainplan.costmodel.params import model_params, stack_params
from trainplan.costmodel.vision_flops import tower_train_flops_per_image

REDUCED = {   # (H, W, vision layers, full-attention layer indexes): CPU runs
    "qwen2-vl-7b": (224, 224, 2, None),
    "qwen2.5-vl-3b": (224, 448, 4, (3,)),
    "qwen2.5-vl-7b": (336, 448, 4, (3,)),     # 24 x 32 patches: uneven edge windows
    "qwen2.5-vl-72b": (224, 448, 4, (1,)),
    "idefics3-8b": (364, 364, 1, None),
    "smolvlm-256m": (512, 512, 1, None),
}
TOWERS = {
    "siglip-so400m/14-384 (+head)": dict(model_type="siglip_vision_model", hidden_size=1152,
                                         image_size=384, intermediate_size=4304,
                                         num_attention_heads=16, num_hidden_layers=27, patch_size=14),
    "siglip2-so400m/16-naflex": dict(model_type="siglip2_vision_model", hidden_size=1152,
                                     num_patches=256, intermediate_size=4304,
                                     num_attention_heads=16, num_hidden_layers=2, patch_size=16),
    "internvit-300m": dict(model_type="internvl_vision", hidden_size=1024, intermediate_size=4096,
                           num_hidden_layers=24, num_attention_heads=16, attention_bias=True),
    "clip-vit-l/14-336": dict(model_type="clip_vision_model", hidden_size=1024, image_size=336,
                              intermediate_size=4096, num_attention_heads=16,
                              num_hidden_layers=24, patch_size=14),
}


def pct(a: float, b: float) -> str:
    return f"{(a - b) / b * 100:+.3f}%"


def run() -> tuple[int, int]:
    """Print the vision-language section; return (models compared, models failing)."""
    bad = compared = 0
    print(f"{'preset':20s} {'params trainplan':>16s} {'transformers':>16s} {'equal':>5s}  "
          f"{'vision':>5s} {'proj':>5s} {'dec':>5s}   {'run':>16s} {'tower GFLOP tp/ref':>22s} "
          f"{'diff':>8s} {'proj GFLOP tp/ref':>20s} {'diff':>8s}")
    for rec in vision_presets():
        pid = rec["id"]
        m = get_vlm_preset(pid)
        p = model_params(m)
        if pid == "qwen-vl-7b":
            print(f"{pid:20s} {p.total:16,d} {'not built: remote code (QWenLMHeadModel)':>40s}")
            continue
        t = time.perf_counter()
        ref = R.reference_params(rec["config"])
        ours = dict(vision=sum(p.by_stack[v.name] for v in m.vision), projector=p.projectors,
                    decoder=p.by_stack[m.decoder.name], total=p.total)
        eq = {k: ours[k] == ref[k] for k in ours}
        side = m.vision[0].image_size
        h, w, layers, full = REDUCED.get(pid, (side, side, None, None))
        rf = R.reference_vision_flops(rec["config"], h, w, layers, full)
        of = R.trainplan_vision_flops(m, h, w, layers, full)
        run = f"{layers or m.vision[0].layers}L {h}x{w} {rf['device']}"
        ok_f = all(abs(of[k] - rf[k]) <= 0.01 * rf[k] for k in ("tower", "projector"))
        ok = all(eq.values()) and ok_f
        compared += 1
        bad += not ok
        mark = lambda b: "yes" if b else "NO"
        print(f"{pid:20s} {ours['total']:16,d} {ref['total']:16,d} {mark(eq['total']):>5s}  "
              f"{mark(eq['vision']):>5s} {mark(eq['projector']):>5s} {mark(eq['decoder']):>5s}   "
              f"{run:>16s} {of['tower'] / 1e9:10.2f}/{rf['tower'] / 1e9:<10.2f} "
              f"{pct(of['tower'], rf['tower']):>8s} {of['projector'] / 1e9:9.3f}/"
              f"{rf['projector'] / 1e9:<9.3f} {pct(of['projector'], rf['projector']):>8s}"
              f"  ({time.perf_counter() - t:.1f}s)")
        if not eq["decoder"]:
            print(f"{'':20s} decoder differs by {ref['decoder'] - ours['decoder']:,d}")
    print()
    print(f"{'tower':30s} {'params trainplan':>16s} {'transformers':>16s} {'GFLOP trainplan':>16s} "
          f"{'FlopCounter':>12s} {'diff':>8s}")
    for name, cfg in TOWERS.items():
        s = vision_tower_from_hf(cfg)
        ref = R.reference_tower(cfg)
        f = float(tower_train_flops_per_image(s, True, ref["height"], ref["width"]))
        n = stack_params(s).total
        compared += 1
        bad += (n != ref["params"]) or (abs(f - ref["flops"]) > 0.01 * ref["flops"])
        print(f"{name:30s} {n:16,d} {ref['params']:16,d} {f / 1e9:16.2f} {ref['flops'] / 1e9:12.2f} "
              f"{pct(f, ref['flops']):>8s}")
    print(f"\nvision-language: {compared} compared, {compared - bad} PASS, {bad} FAIL "
          "(parameters equal in every part, tower and projector FLOPs within 1%)")
    return compared, bad


def main() -> int:
    return 1 if run()[1] else 0


if __name__ == "__main__":
    sys.exit(main())
