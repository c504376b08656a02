"""trainplan diagnose oom over the shared real OOM reports (../shared/artifacts/oom_cases.json).

For every report whose record gives the model, the GPU (or its capacity in the error line), the
GPU count and a resolution, the configuration below is read off the record's own fields (model,
gpu, num_gpus, parallelism, micro_batch, seq_len, precision, lora_or_full, command). Where the
record leaves a field empty the stated ASSUMED default is used (micro-batch 1; sequence length
from the framework's documented default, else 2048), never a value chosen to make a case agree.

RESOLUTION maps each record's ``resolution`` text to the component(s) the fix acts on:
batch size / max length / pixels / VPP / context parallel -> activations; CPU offload of the
optimizer, ZeRO stage for states, more GPUs under ZeRO-3 -> optimizer (and gradients for ZeRO-2,
weights for ZeRO-3 with frozen LoRA weights). When the thread offers alternatives, each counts.
"Enough configuration" (the headline figure) means the record states the model, the GPU or its
capacity, the GPU count, the parallelism and at least one of micro-batch and sequence length;
records that state neither are also run with the ASSUMED defaults and counted separately.
Records without a visible resolution (or whose fix was not about memory sizing) are listed and
skipped. GPUs missing from trainplan's catalog use the nearest catalog part with the capacity
from the record (memory is what is compared; the step times of those cases are indicative).

Run: PYTHONPATH=src python benchmarks/diagnose_oom.py
"""

from __future__ import annotations

import json
from pathlib import Path

from trainplan.catalog import model_from_hf_config
from trainplan.diagnose.oom import Measured, parse_message
from trainplan.diagnose.oomplan import Config, diagnose

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / ".." / "shared" / "artifacts" / "oom_cases.json"

# public config.json values (facebook/opt-1.3b; ai-forever/rugpt3large_based_on_gpt2), written
# in GPT-2 form: OPT is a pre-LN decoder with learned positions and a 4x MLP like GPT-2
OPT_1_3B = model_from_hf_config({"model_type": "gpt2", "n_embd": 2048, "n_layer": 24, "n_head": 32,
                                 "vocab_size": 50272, "n_positions": 2048}, "OPT-1.3b")
RUGPT3_LARGE = model_from_hf_config({"model_type": "gpt2", "n_embd": 1536, "n_layer": 24,
                                     "n_head": 16, "vocab_size": 50264, "n_positions": 2048},
                                    "ruGPT-3 Large")

HF = dict(recompute="none", flash_attention=False)  # HF eager attention (before transformers 4.36)
HF24 = dict(recompute="none", flash_attention=True)  # SDPA by default from transformers 4.36
# id -> (Config, components the resolution acts on, ASSUMED fields)
RESOLUTION = {
    "oom_instruction-tuning-with-gpt-4_gpt-4-llm_16": (
        Config("llama-2-7b", "a100_sxm_80gb", 2, 2048, 2, dict(zero=3, micro_batch=1, **HF),
               "deepspeed"), {"activations", "optimizer"}, "seq 2048, mb 1"),
    "oom_tatsu-lab_stanford_alpaca_223": (
        Config("llama-2-7b", "v100_sxm2_32gb", 5, 512, 40, dict(zero=3, micro_batch=1, **HF),
               "fsdp", dict(precision="fp16_mixed")), {"optimizer"}, ""),
    "oom_huggingface_trl_3436": (
        Config("llama-2-7b", "rtx_4090", 8, 1024, 8, dict(zero=3, micro_batch=1, **HF24), "fsdp",
               dict(trainable="lora")), {"activations"}, "seq 1024 (TRL max_length default), mb 1"),
    "oom_deepspeedai_deepspeed_3208": (
        Config(OPT_1_3B, "v100_sxm2_32gb", 1, 512, 16, dict(zero=0, micro_batch=16, **HF),
               "deepspeed", dict(precision="fp16_mixed")), {"optimizer", "activations"},
        "seq 512, mb 16 (DeepSpeed-Chat defaults)"),
    "oom_nvidia-nemo_automodel_pr2673": (
        Config("llama-3-70b", "h100_sxm", 32, 1024, 128,
               dict(pp=8, zero=3, micro_batch=4, recompute="none"), "torchtitan",
               dict(precision="bf16_pure")), {"activations"},
        "global batch 128; FSDP2 + pipeline parallel = the torchtitan profile"),
    "oom_modelscope_ms-swift_2753": (
        Config("qwen2-vl-7b", "l40s", 4, 2048, 4, dict(zero=2, micro_batch=1, **HF24), "deepspeed",
               dict(trainable="lora")), {"activations", "weights"}, "seq 2048, mb 1"),
    "oom_ai-forever_ru-gpts_27": (
        Config(RUGPT3_LARGE, "v100_sxm2_32gb", 1, 256, 1, dict(zero=0, micro_batch=1, **HF),
               "pytorch", dict(precision="fp16_mixed")), {"optimizer"}, ""),
    "oom_hiyouga_llamafactory_5977": (
        Config("llama-3-8b", "rtx_4090", 8, 1024, 8, dict(zero=3, micro_batch=1, **HF24),
               "deepspeed", dict(precision="fp16_mixed")), {"optimizer"}, ""),
    "oom_deepspeedai_deepspeedexamples_387": (
        Config(OPT_1_3B, "v100_sxm2_32gb", 1, 512, 16, dict(zero=0, micro_batch=16, **HF),
               "deepspeed", dict(precision="fp16_mixed")), {"activations", "optimizer"},
        "seq 512 (DeepSpeed-Chat default)"),
    "oom_hiyouga_llamafactory_4026": (
        Config("llama-3-8b", "a100_sxm_80gb", 8, 8192, 16, dict(zero=0, micro_batch=2, **HF24),
               "pytorch", dict(precision="fp16_mixed", trainable="lora")),
        {"optimizer", "gradients"}, ""),
    "oom_nvidia-nemo_megatron-bridge_pr3107": (
        Config("llama-3-70b", "h100_sxm", 32, 4096, 32,
               dict(tp=4, pp=4, vp=5, micro_batch=1, recompute="selective"), "megatron",
               dict(precision="fp8_mixed")), {"activations"}, "seq 4096, mb 1, global batch 32"),
}
SKIP = {"oom_meta-llama_llama-cookbook_235": "no resolution visible",
        "oom_simplescaling_s1_106": "no resolution visible",
        "oom_deepspeedai_deepspeed_3312": "no resolution visible",
        "oom_modelscope_ms-swift_2010": "no resolution visible",
        "oom_karpathy_nanogpt_61": "no fix found in the thread",
        "oom_ssbuild_chatglm3_finetuning_31": "not a sizing problem (stale files)",
        "oom_tatsu-lab_stanford_alpaca_86": "no resolution visible",
        "oom_zhziszz_dllm_9": "no answer visible",
        "oom_hiyouga_llamafactory_5545": "resolution not in the excerpt",
        "oom_nvidia-nemo_rl_903": "GPU not given"}


def main() -> None:
    cases = {c["id"]: c for c in json.loads(CASES.read_text())["cases"]}
    tally = {True: [0, 0, 0], False: [0, 0, 0]}  # strict? -> [cases, agree, first fits]
    for cid, case in cases.items():
        if cid not in RESOLUTION:
            print(f"SKIP  {cid}: {SKIP.get(cid, 'not enough configuration')}")
            continue
        cfg, want, assumed = RESOLUTION[cid]
        err = case.get("error_verbatim") or ""
        meas = parse_message(err) if "Tried to allocate" in err else Measured(source="record only")
        if meas.capacity_gib is None and case.get("gpu_memory_gib"):
            meas.capacity_gib = float(case["gpu_memory_gib"])
        r = diagnose(meas, cfg)
        strict = case.get("micro_batch") is not None or case.get("seq_len") is not None
        ok = r["component"] in want
        first = r["changes"][0] if r["changes"] else None
        t = tally[strict]
        t[0] += 1
        t[1] += ok
        t[2] += bool(first and first["fits"])
        print(f"{'AGREE' if ok else 'DIFF '} {cid}{'' if strict else ' [mb and seq assumed]'}\n      trainplan: {r['component']} "
              f"({r['reason']}); resolution acts on: {', '.join(sorted(want))}"
              f"\n      plan {r['predicted']['total']:.1f} GiB of {r['capacity_gib']:.1f} "
              f"[{r['layout']}], measured need "
              f"{'%.1f GiB' % r['measured_need_gib'] if r['measured_need_gib'] else 'n/a'}"
              + (f"; assumed {assumed}" if assumed else ""))
        if first:
            print(f"      first change: {first['change']} -> {first['memory_gib']:.1f} GiB "
                  f"(+{r['excess_over_plan_gib']:.1f} measured excess), step "
                  f"{first['step_s']:.2f} s (x{first['slowdown']:.2f}) fits={first['fits']}")
        else:
            print("      no single or paired change fits")
    for label, (n, agree, fits) in (("enough configuration", tally[True]),
                                    ("with assumed mb and seq", tally[False]),
                                    ("all", [a + b for a, b in zip(tally[True], tally[False])])):
        print(f"{label:>24}: component agrees with the resolution {agree}/{n} = {agree / n:.0%}; "
              f"first suggested change fits by trainplan's estimate {fits}/{n}")


if __name__ == "__main__":
    main()
