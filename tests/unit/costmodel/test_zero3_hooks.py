"""ZeRO-3 host time: DeepSpeed's per-module hooks bound a small layer's pass from below
(compute.zero3_hook_time; per-module time measured by benchmarks/zero3_hook_time.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.costmodel.compute import zero3_hook_time
from trainplan.spec.framework import get_framework


def test_hook_time_only_at_zero3_and_broadcasts():
    ds = get_framework("deepspeed")
    f, b = zero3_hook_time(ds, np.array([0, 1, 2, 3]))
    n = ds.zero3_hooked_modules_per_layer
    assert list(f[:3]) == [0.0, 0.0, 0.0] and list(b[:3]) == [0.0, 0.0, 0.0]
    assert f[3] == pytest.approx(n * ds.zero3_hook_s[0])
    assert b[3] == pytest.approx(n * ds.zero3_hook_s[1])
    # a profile without a measurement adds nothing
    assert zero3_hook_time(get_framework("megatron"), 3) == (0.0, 0.0)
    # FSDP1 (HF Accelerate, Composer): one unit per layer, measured like FSDP2
    for name in ("fsdp", "llm-foundry"):
        fw = get_framework(name)
        assert fw.zero3_hooked_modules_per_layer == 1
        assert 0.0 < sum(zero3_hook_time(fw, 3)) < sum(zero3_hook_time(ds, 3))
    # FSDP2 (torchtitan): one hooked unit per layer, far cheaper than DeepSpeed's 13 modules
    tt = get_framework("torchtitan")
    assert tt.zero3_hooked_modules_per_layer == 1
    assert sum(zero3_hook_time(tt, 3)) < 0.2 * sum(zero3_hook_time(ds, 3))


def _step(zero, seq, micro_batch=1):
    st = {"tp": 1, "pp": 1, "dp": 8, "zero": zero, "micro_batch": micro_batch,
          "recompute": "full"}
    return estimate("llama-3-8b", gpu="h100_sxm", gpus=8, seq_len=seq,
                    global_batch=8 * micro_batch, precision="bf16_mixed", framework="deepspeed",
                    strategy=st)


def test_small_batch_zero3_is_host_bound_by_its_hooks():
    """512 tokens per GPU: a Llama-3-8B layer's GPU work is shorter than the hooks' host time,
    so each pass of each layer takes the host time (forward, recomputed forward, backward)."""
    ds = get_framework("deepspeed")
    z3 = _step(3, 512)
    layers = get_model("llama-3-8b").decoder.layers
    f, b = zero3_hook_time(ds, 3)
    floor = layers * (2 * f + b)
    assert z3.time.compute_s >= floor * 0.999
    # without the hooks (ZeRO-2) the same layers' GPU work is well under that floor
    assert _step(2, 512).time.compute_s < 0.5 * floor


def test_long_sequences_stay_gpu_bound():
    """At 32K tokens per GPU the GPU work per layer dwarfs the hooks: the same compute time
    with and without them."""
    with_hooks = _step(3, 32768).time.compute_s
    assert with_hooks == pytest.approx(_step(2, 32768).time.compute_s, rel=1e-9)


_HOOK_COUNT = """
import json, os
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["TP_PORT"], RANK="0",
                  WORLD_SIZE="1", LOCAL_RANK="0")
import deepspeed
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
model = LlamaForCausalLM(cfg)
layer = list(model.model.layers[0].modules())
deepspeed.init_distributed(dist_backend="gloo")
ds = {"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds)
hooked = [m for m in layer if m._forward_pre_hooks and m._forward_hooks]
print("RESULT", json.dumps({"modules": len(layer), "hooked": len(hooked)}))
"""


def test_module_count_is_transformers_llama_layer_and_deepspeed_hooks_each():
    """The profile's module count is the module tree of transformers' Llama decoder layer, and
    DeepSpeed's ZeRO-3 engine puts its hooks on every one of them (the real engine on the CPU,
    in its own process: DeepSpeed's initialisation changes torch's global state)."""
    import json
    import socket
    import subprocess
    import sys

    pytest.importorskip("transformers")
    pytest.importorskip("deepspeed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, TP_PORT=str(port), DS_ACCELERATOR="cpu")
    out = subprocess.run([sys.executable, "-c", _HOOK_COUNT], capture_output=True, text=True,
                         env=env, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, out.stderr[-2000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got["modules"] == get_framework("deepspeed").zero3_hooked_modules_per_layer
    assert got["hooked"] == got["modules"]


_FSDP1_UNITS = """
import json, torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
model = FSDP(LlamaForCausalLM(cfg), auto_wrap_policy=ModuleWrapPolicy({LlamaDecoderLayer}),
             sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"),
             use_orig_params=True)
units = [m for m in model.modules() if isinstance(m, FSDP)]
ids = torch.randint(0, 128, (1, 8))
model(input_ids=ids, labels=ids).loss.backward()
print("RESULT", json.dumps({"units": len(units) - 1, "layers": 3,
                            "strategy": str(units[1].sharding_strategy)}))
"""


def test_fsdp1_wraps_one_unit_per_layer_over_the_fake_group():
    """The FSDP1 measurement's set-up (benchmarks/zero3_hook_time.py): over torch's fake process
    group of eight ranks, FULL_SHARD stays FULL_SHARD (one rank would fall back to NO_SHARD) and
    the transformer-layer wrap policy gives one unit per decoder layer besides the root: the
    profile's count. Own process: it installs its own default process group."""
    import json
    import subprocess
    import sys

    pytest.importorskip("transformers")
    out = subprocess.run([sys.executable, "-c", _FSDP1_UNITS], capture_output=True, text=True,
                         timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, out.stderr[-2000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got["units"] == got["layers"] * get_framework("fsdp").zero3_hooked_modules_per_layer
    assert got["strategy"].endswith("FULL_SHARD")


def test_vision_tower_layers_take_the_same_hook_floor():
    """A frozen CLIP tower under ZeRO-3 runs its forward through the same hooks (ZeRO-3
    partitions frozen weights too): one image per micro-batch is host-bound at ZeRO-3, and its
    forward takes at least the tower's layers x the forward hook time."""
    import trainplan.catalog.vlm as V
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import vision as cv
    from trainplan.costmodel.evaluate import Layout
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job

    m = V.get_vlm_preset("llava-1.5-7b")
    job = Job(seq_len=1024, global_batch=8, images_per_sample=1, frozen=("vision",),
              framework="deepspeed")
    cl = Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8)
    t = {z: cv.vision_costs(m, job, Layout(dp=8, mb=1, zero=z), cl)["time_per_mb"]
         for z in (2, 3)}
    f, _ = zero3_hook_time(get_framework("deepspeed"), 3)
    tower_layers = m.vision[0].layers
    assert t[2] < 0.5 * tower_layers * f          # without hooks: GPU work, well under it
    assert t[3] >= tower_layers * f * 0.999


def test_estimate_says_when_the_hooks_set_the_pace():
    def host_bound(est):
        return [w for w in est.warnings if w.startswith("host-bound")]
    assert host_bound(_step(3, 512))
    assert not host_bound(_step(2, 512))         # no ZeRO-3 hooks
    assert not host_bound(_step(3, 32768))       # the GPU sets the pace


def test_a_users_profile_with_negative_hook_time_is_a_clear_input_error(tmp_path, monkeypatch):
    import json

    from trainplan.errors import InputError
    from trainplan.spec import framework as fwmod

    row = get_framework("deepspeed").model_dump()
    row.update(id="my-ds", zero3_hook_s=[-1e-4, 1e-4])
    f = tmp_path / "fw.json"
    f.write_text(json.dumps({"frameworks": [row]}))
    monkeypatch.setenv("TRAINPLAN_FRAMEWORKS", str(f))
    fwmod._catalog.cache_clear()
    try:
        with pytest.raises(InputError) as e:
            get_framework("my-ds")
        assert "zero3_hook_s" in str(e.value)
    finally:
        fwmod._catalog.cache_clear()
