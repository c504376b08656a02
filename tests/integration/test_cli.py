"""CLI: runs, prints, exits 2 on bad input without a traceback."""

import json


from trainplan.cli import app
from cli_helpers import assert_exits_2, invoke, runner



def test_estimate_default_example():
    r = runner.invoke(app, ["estimate"])
    assert r.exit_code == 0, r.output
    assert "Memory per GPU" in r.output and "Step time" in r.output


def test_estimate_json_flags():
    r = runner.invoke(app, ["estimate", "--model", "llama-2-7b", "--gpu", "a100-80gb", "--gpus", "8",
                            "--zero", "3", "--seq-len", "4096", "--global-batch", "64", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["params_total"] == 6_738_415_616 and d["strategy"]["zero"] == 3


def test_estimate_bad_tp_exit_2():
    r = runner.invoke(app, ["estimate", "--model", "llama-2-7b", "--gpu", "h100", "--gpus", "8",
                            "--tp", "3"])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "tp" in r.output


def test_unknown_gpu_exit_2():
    r = runner.invoke(app, ["estimate", "--model", "llama-2-7b", "--gpu", "nope"])
    assert r.exit_code == 2 and "gpu" in r.output


def test_bad_job_file_keys(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text("[job]\nseq_len = 4096\nbatch = 3\n")
    r = runner.invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2 and "batch" in r.output
    f.write_text("[jobb]\n")
    r = runner.invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2 and "jobb" in r.output
    f.write_text("[job\n")
    r = runner.invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2


def test_models_and_gpus_lists():
    r = runner.invoke(app, ["models", "--json"])
    assert r.exit_code == 0
    ids = {m["id"] for m in json.loads(r.output)}
    assert {"llama-2-7b", "llama-3.1-405b", "mixtral-8x7b", "gpt3-175b"} <= ids
    r = runner.invoke(app, ["gpus", "--json"])
    assert r.exit_code == 0 and len(json.loads(r.output)) >= 10


def test_profile_file_changes_prediction(tmp_path):
    base = ["estimate", "--model", "llama-2-7b", "--gpu", "h100", "--gpus", "8", "--zero", "1",
            "--seq-len", "4096", "--global-batch", "64", "--json"]
    r0 = runner.invoke(app, base)
    f = tmp_path / "prof.json"
    f.write_text(json.dumps({"efficiency": {"gemm_max": 0.4}}))
    r1 = runner.invoke(app, base + ["--profile", str(f)])
    assert r0.exit_code == 0 and r1.exit_code == 0, r1.output
    assert json.loads(r1.output)["time"]["step_s"] > 1.5 * json.loads(r0.output)["time"]["step_s"]
    f.write_text(json.dumps({"gemm_max": 7}))
    r2 = runner.invoke(app, base + ["--profile", str(f)])
    assert r2.exit_code == 2 and "gemm_max" in r2.output
    # a profile `measure bench` wrote on the CPU: its GPU-side figures are the CPU's and are
    # refused; its host-optimizer rate (measure bench --offload) applies
    cpu = {"device": "cpu", "profile": {"gemm_max": 1.0, "hbm": 1.0, "intra_busbw_GBps": 0.5,
                                        "source": "trainplan measure bench on CPU"}}
    f.write_text(json.dumps(cpu))
    r3 = runner.invoke(app, base + ["--profile", str(f)])
    assert r3.exit_code == 2 and "measured on the CPU" in r3.output
    cpu["profile"]["host_adam_params_per_s"] = 5e8
    f.write_text(json.dumps(cpu))
    off = base + ["--offload-optimizer"]
    r4, r5 = runner.invoke(app, off + ["--profile", str(f)]), runner.invoke(app, off)
    assert r4.exit_code == 0 and r5.exit_code == 0, r4.output + r5.output
    t4, t5 = (json.loads(r.output)["time"] for r in (r4, r5))
    assert t4["optimizer_s"] > t5["optimizer_s"]              # the slower measured host rate
    assert t4["compute_s"] == t5["compute_s"]                 # the GPU figures untouched


def test_estimate_attention_kernel_and_fused_ops_flags():
    """--attention-kernel fa3 and --fused-ops reach the job: on an H200 at 128K tokens the
    fused linear cross-entropy removes the whole fp32 logits and FlashAttention-3 shortens the
    step; FA3 on an A100 and an unknown op group are refused with exit 2."""
    import json
    from cli_helpers import assert_exits_2, invoke
    base = ["estimate", "--model", "llama-3-8b", "--gpu", "h200", "--gpus", "8", "--seq-len",
            "131072", "--global-batch", "8", "--framework", "deepspeed", "--zero", "3",
            "--recompute", "full", "--json"]
    plain = json.loads(invoke(*base).output)
    fused = json.loads(invoke(*base, "--fused-ops", "norm,rope,swiglu,linear_cross_entropy",
                              "--attention-kernel", "fa3").output)
    assert fused["memory"]["total_gib"] < plain["memory"]["total_gib"] - 80
    assert fused["time"]["step_s"] < 0.8 * plain["time"]["step_s"]
    assert_exits_2(invoke("estimate", "--model", "llama-3-8b", "--gpu", "a100",
                          "--attention-kernel", "fa3"), "job.attention_kernel", "Hopper")
    assert_exits_2(invoke("estimate", "--model", "llama-3-8b", "--fused-ops", "bogus"),
                   "job.fused_ops", "linear_cross_entropy")
    assert_exits_2(invoke("estimate", "--model", "llama-3-8b", "--gpu", "h100",
                          "--precision", "fp8_mixed", "--fp8-recipe", "mxfp8"),
                   "job.fp8_recipe", "Blackwell")


def test_lora_and_frozen_flags_reach_the_job():
    """--lora (or a --lora-rank alone) trains adapters on the frozen base: no gradients for the
    base weights, a few hundred MiB of optimizer state instead of tens of GiB; --frozen freezes a
    stack by name, and a name the model does not have is refused with exit 2 (it used to freeze
    nothing, silently)."""
    import json
    from cli_helpers import assert_exits_2, invoke
    base = ["estimate", "--model", "llama-3-8b", "--gpu", "a100_sxm_80gb", "--gpus", "1",
            "--seq-len", "2048", "--global-batch", "8", "--framework", "pytorch", "--json"]
    full = json.loads(invoke(*base).output)
    lora = json.loads(invoke(*base, "--lora").output)
    rank64 = json.loads(invoke(*base, "--lora-rank", "64").output)
    assert full["inputs"]["job"]["trainable"] == "full"
    assert lora["inputs"]["job"]["trainable"] == "lora" and lora["inputs"]["job"]["lora_rank"] == 16
    assert rank64["inputs"]["job"]["trainable"] == "lora" and rank64["inputs"]["job"]["lora_rank"] == 64
    assert lora["memory"]["optimizer_gib"] < 0.5 < 50 < full["memory"]["optimizer_gib"]
    assert 3.5 * lora["memory"]["optimizer_gib"] < rank64["memory"]["optimizer_gib"]
    assert json.loads(invoke(*base, "--lora-rank", "64", "--full").output)["inputs"]["job"][
        "trainable"] == "full"
    vlm = json.loads(invoke("estimate", "--frozen", "vision", "--json").output)
    assert vlm["inputs"]["job"]["frozen"] == ["vision"]
    assert_exits_2(invoke("estimate", "--frozen", "vison"), "job.frozen", "vision")
    assert_exits_2(invoke("plan", "--frozen", "vison", "--gpus", "8"), "job.frozen", "decoder")
    # freezing every part trains nothing: refused, pointing at LoRA
    assert_exits_2(invoke("estimate", "--model", "llama-3-8b", "--frozen", "decoder"),
                   "job.frozen", "nothing would train")
    assert invoke("estimate", "--model", "llama-3-8b", "--frozen", "decoder", "--lora").exit_code == 0


def test_base_weights_flags_reach_the_job_and_bad_combinations_exit_2():
    """--base-weights nf4 with --lora is QLoRA: the job carries it (and --no-double-quant), the
    weights shrink to about a third, the assumptions name it; estimate and plan refuse a 4-bit
    base that would be trained, and an unknown format, with exit 2."""
    import json
    from cli_helpers import assert_exits_2, invoke
    base = ["estimate", "--model", "llama-3-8b", "--gpu", "l40s", "--gpus", "1", "--seq-len",
            "2048", "--global-batch", "8", "--framework", "fsdp", "--lora", "--json"]
    lora = json.loads(invoke(*base).output)
    q = json.loads(invoke(*base, "--base-weights", "nf4").output)
    no_dq = json.loads(invoke(*base, "--base-weights", "nf4", "--no-double-quant").output)
    assert q["inputs"]["job"]["base_weights"] == "nf4" and q["inputs"]["job"]["double_quant"]
    assert no_dq["inputs"]["job"]["double_quant"] is False
    assert q["memory"]["weights_gib"] < lora["memory"]["weights_gib"] / 2.5
    assert q["memory"]["weights_gib"] < no_dq["memory"]["weights_gib"]
    assert any("NF4" in a for a in q["assumptions"])
    assert_exits_2(invoke("estimate", "--model", "llama-3-8b", "--base-weights", "nf4"),
                   "job.base_weights", "trainable = lora")
    assert_exits_2(invoke("plan", "--model", "llama-3-8b", "--gpus", "1", "--base-weights",
                          "nf4"), "job.base_weights")
    assert_exits_2(invoke("estimate", "--lora", "--base-weights", "int3"), "--base-weights")


def test_vlm_fields_from_the_command_line_and_what_the_estimate_assumes():
    """Images per sample, image size, text tokens and samples were job-file only, and the
    output did not say what image the tower was charged for."""
    import json as _json

    from typer.testing import CliRunner

    from trainplan.cli import app
    args = ["estimate", "--model", "internvl3-8b", "--gpus", "8", "--seq-len", "8192",
            "--images-per-sample", "2", "--image-size", "896x1344", "--text-tokens", "300",
            "--samples", "1e6", "--epochs", "2"]
    r = CliRunner().invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    d = _json.loads(r.output)
    job = d["inputs"]["job"]
    assert (job["images_per_sample"], job["text_tokens"], job["samples"], job["epochs"]) \
        == (2.0, 300.0, 1e6, 2.0)
    assert job["image_resolutions"] == [[896.0, 1344.0, 1.0]]
    assert d["totals"]["tokens"] == 1e6 * 2 * (300 + 2 * 7 * 256)      # 7 InternVL tiles
    text = " ".join(CliRunner().invoke(app, args, env={"COLUMNS": "200"}).output.split())
    assert "2 image(s) per sample (896x1344 px, 7 tower passes of 448 px: 1,792 decoder " \
           "tokens each)" in text
    bad = CliRunner().invoke(app, ["estimate", "--model", "qwen2-vl-7b", "--image-size", "0x4"])
    assert bad.exit_code == 2 and "--image-size" in bad.output


def test_oversized_node_exits_2_naming_the_link_domain():
    r = invoke("estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "32",
               "--gpus-per-node", "16")
    assert_exits_2(r, "gpus_per_node (16)", "gpus_per_node <= 8")


def test_network_flags_reach_the_data_parallel_time():
    """--inter-node-gbps is the job file's cluster.inter_node_Gbps: a slower NIC makes the
    multi-node gradient sync, and only it, slower; a bad value exits 2."""
    args = ("estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "64", "--zero", "1",
            "--json")
    base = json.loads(invoke(*args).stdout)["time"]
    slow = json.loads(invoke(*args, "--inter-node-gbps", "100").stdout)["time"]
    assert slow["dp_comm_s"] > 2 * base["dp_comm_s"] > 0
    assert slow["compute_s"] == base["compute_s"]
    fast_link = json.loads(invoke(*args, "--tp", "8", "--intra-node-gbps", "900").stdout)["time"]
    tp8 = json.loads(invoke(*args, "--tp", "8").stdout)["time"]
    assert fast_link["tp_comm_s"] < tp8["tp_comm_s"]
    assert_exits_2(invoke(*args, "--inter-node-gbps", "-3"), "inter_node_Gbps", "-3")
