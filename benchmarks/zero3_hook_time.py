"""Measurement: host time ZeRO-3 engines add per hooked module and pass (real engines, CPU).

ZeRO-3 registers forward and backward hooks on every submodule (deepspeed/runtime/zero/
parameter_offload.py ``_register_deepspeed_module``; partitioned_param_coordinator.py
``fetch_sub_module``/``release_sub_module``: trace recording, fetch, prefetch and release
bookkeeping in Python). That host work bounds a pass from below when the GPU work per layer is
short (small per-GPU batches). This script runs transformers' ``LlamaForCausalLM`` under
DeepSpeed's real engine on the CPU accelerator (gloo, one rank, tiny widths so the math is
negligible), at ZeRO stage 0 and stage 3, with 4 and 12 layers; the per-layer difference between
the stages over the module count of one decoder layer is the per-module host time the profile's
``zero3_hook_s`` holds. The same measurement for PyTorch FSDP2 (``fully_shard`` on each decoder
layer, one hooked unit per layer: its pre/post-forward and backward hooks gather, reshard and
reduce-scatter) gives torchtitan's. PyTorch FSDP1 (``FullyShardedDataParallel`` with one unit per
decoder layer, as HF Accelerate's transformer-layer auto-wrap and Composer wrap it) falls back to
NO_SHARD on one rank, so it runs FULL_SHARD over torch's in-process fake process group of eight
ranks (``torch.testing._internal.distributed.fake_pg``: every collective returns at once, so only
the library's own host work is timed); that gives the ``fsdp`` and ``llm-foundry`` profiles'.
Each figure is the best of three runs (a shared machine only adds time). A GPU host also issues CUDA stream and event calls in those hooks, so on GPUs these
are lower bounds.

    python benchmarks/zero3_hook_time.py          # needs the test extra and deepspeed
"""

from __future__ import annotations

import os
import platform
import time
import warnings

os.environ.setdefault("DS_ACCELERATOR", "cpu")
for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29561"), ("RANK", "0"),
             ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
    os.environ.setdefault(k, v)
warnings.filterwarnings("ignore")

STEPS, WARMUP, TOKENS = 15, 3, 16


def llama(layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                      max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).train()


def timed(step, ids) -> tuple[float, float]:
    """Mean seconds of the forward and of the backward of ``step`` (forward, backward, update
    callables), after a warm-up; the best of three runs."""
    best = (float("inf"), float("inf"))
    for _ in range(3):
        tf = tb = 0.0
        for i in range(WARMUP + STEPS):
            a = time.perf_counter()
            loss = step[0](ids)
            b = time.perf_counter()
            step[1](loss)
            c = time.perf_counter()
            step[2]()
            if i >= WARMUP:
                tf, tb = tf + b - a, tb + c - b
        best = (min(best[0], tf / STEPS), min(best[1], tb / STEPS))
    return best


def plain_step_times(model) -> tuple[float, float]:
    """Forward and backward seconds of ``model`` (wrapped or not) with a plain AdamW step."""
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def update():
        opt.step()
        opt.zero_grad()
    return timed((lambda ids: model(input_ids=ids, labels=ids).loss, lambda loss: loss.backward(),
                  update), torch.randint(0, 128, (1, TOKENS)))


def fsdp2_pass_times(layers: int, shard: bool) -> tuple[float, float]:
    """Forward and backward seconds with every decoder layer (and the model) under FSDP2's
    ``fully_shard``, or plain."""
    from torch.distributed.fsdp import fully_shard
    model = llama(layers)
    if shard:
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    return plain_step_times(model)


def fsdp1_pass_times(layers: int, shard: bool) -> tuple[float, float]:
    """Forward and backward seconds with each decoder layer an FSDP1 FULL_SHARD unit (the model
    the root unit), or plain; needs a process group of more than one rank."""
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    model = llama(layers)
    if shard:
        model = FullyShardedDataParallel(
            model, auto_wrap_policy=ModuleWrapPolicy({LlamaDecoderLayer}),
            sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"),
            use_orig_params=True)
    return plain_step_times(model)


def fsdp1_unit_time() -> tuple[float, float]:
    """FSDP1's host seconds per unit, forward and backward, over a fake group of eight ranks."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        per = {}
        for shard in (False, True):
            (f4, b4), (f12, b12) = (fsdp1_pass_times(n, shard) for n in (4, 12))
            per[shard] = ((f12 - f4) / 8, (b12 - b4) / 8)
    finally:
        dist.destroy_process_group()
    return per[True][0] - per[False][0], per[True][1] - per[False][1]


def pass_times(stage: int, layers: int, persistence: int) -> tuple[float, float]:
    """Forward and backward seconds of one training step under DeepSpeed at ZeRO ``stage``."""
    import deepspeed
    import torch
    model = llama(layers)
    zero = {"stage": stage}
    if stage == 3:      # 0: every parameter partitioned, as a large model's weights are
        zero["stage3_param_persistence_threshold"] = persistence
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
    eng, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    return timed((lambda ids: eng(input_ids=ids, labels=ids).loss, eng.backward, eng.step),
                 torch.randint(0, 128, (1, TOKENS)))


def hooked_modules_per_layer() -> int:
    """Modules of one transformers Llama decoder layer, the layer itself included."""
    return sum(1 for _ in llama(1).model.layers[0].modules())


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        return f"{names[0]} x {len(names)}" if names else platform.machine()
    except OSError:
        return platform.processor() or platform.machine()


def main() -> None:
    import deepspeed
    import torch
    import transformers
    torch.set_num_threads(1)
    fsdp1 = fsdp1_unit_time()
    torch.distributed.init_process_group("gloo")
    # FSDP2 first: DeepSpeed's initialisation changes torch's global state
    unit = {}
    for shard in (False, True):
        (f4, b4), (f12, b12) = (fsdp2_pass_times(n, shard) for n in (4, 12))
        unit[shard] = ((f12 - f4) / 8, (b12 - b4) / 8)
    deepspeed.init_distributed(dist_backend="gloo")
    n_mod = hooked_modules_per_layer()
    print(f"host: {cpu_name()}, DeepSpeed {deepspeed.__version__}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{n_mod} modules per Llama decoder layer")
    per_layer = {}
    for stage, pers in ((0, 0), (3, 0), (3, 100_000)):
        (f4, b4), (f12, b12) = (pass_times(stage, n, pers) for n in (4, 12))
        per_layer[(stage, pers)] = ((f12 - f4) / 8, (b12 - b4) / 8)
        print(f"  stage {stage} (persistence threshold {pers:>6}): per layer forward "
              f"{per_layer[(stage, pers)][0] * 1e6:6.0f} us, backward "
              f"{per_layer[(stage, pers)][1] * 1e6:6.0f} us")
    f0, b0 = per_layer[(0, 0)]
    for pers in (0, 100_000):
        f3, b3 = per_layer[(3, pers)]
        print(f"DeepSpeed ZeRO-3 host time per hooked module (threshold {pers}): forward "
              f"{(f3 - f0) / n_mod * 1e6:5.0f} us, backward {(b3 - b0) / n_mod * 1e6:5.0f} us")
    print(f"FSDP2 host time per unit (one per decoder layer): forward "
          f"{(unit[True][0] - unit[False][0]) * 1e6:5.0f} us, backward "
          f"{(unit[True][1] - unit[False][1]) * 1e6:5.0f} us")
    print(f"FSDP1 host time per unit (one per decoder layer, FULL_SHARD over 8 fake ranks): "
          f"forward {fsdp1[0] * 1e6:5.0f} us, backward {fsdp1[1] * 1e6:5.0f} us")


if __name__ == "__main__":
    main()
