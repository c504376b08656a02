import json
import pickle
from collections import OrderedDict

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.oom import parse_message, parse_snapshot, parse_summary, read_artifact, safe_load
from trainplan.diagnose.oomplan import Config
from trainplan.diagnose.oomreport import diagnose
from trainplan.errors import InputError

from pathlib import Path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "diagnose"


def test_every_real_error_line_parses(shared):
    cases = json.loads((shared / "oom_cases.json").read_text())["cases"]
    lines = [c["error_verbatim"] for c in cases if "Tried to allocate" in (c["error_verbatim"] or "")]
    assert len(lines) >= 10
    for text in lines:
        m = parse_message(text)
        assert m.requested_gib > 0
        if "total capac" in text:
            assert 5 < m.capacity_gib < 200
            if m.allocated_gib is not None:
                assert m.allocated_gib <= m.capacity_gib


def test_every_real_error_pasted_into_a_file_is_read(shared, tmp_path):
    # as `trainplan diagnose oom FILE` reads them: torchrun's "[rank7]: ..." prefix starts with
    # '[' like a profiler timeline, and must still be read as a message
    cases = json.loads((shared / "oom_cases.json").read_text())["cases"]
    texts = [c["error_verbatim"] for c in cases if c.get("error_verbatim")]
    assert sum(t.lstrip().startswith("[") for t in texts) >= 3
    for i, text in enumerate(texts):
        f = tmp_path / f"oom{i}.txt"
        f.write_text(text)
        assert read_artifact(f).source == parse_message(text).source
    f = tmp_path / "cut.json"
    f.write_text('[[0, 1, 2048, 3], [1, 1')             # a truncated timeline is still refused
    with pytest.raises(InputError, match="complete JSON"):
        read_artifact(f)
    noise = tmp_path / "noise.dat"                      # named by its file, not its bytes
    noise.write_bytes(bytes(range(1, 200)) * 3)
    with pytest.raises(InputError, match=r"^oom input = '.*noise\.dat' is not valid"):
        read_artifact(noise)
    plotted = tmp_path / "mem.raw.json"                 # export_memory_timeline's plot form
    plotted.write_text("[[0, 1, 2], [[1, 2], [3, 4]]]")
    with pytest.raises(InputError, match=r"\.raw\.json\.gz"):
        read_artifact(plotted)


def test_both_message_forms_give_the_numbers():
    old = parse_message("CUDA out of memory. Tried to allocate 388.00 MiB (GPU 3; 31.75 GiB total "
                        "capacity; 28.42 GiB already allocated; 340.94 MiB free; 30.39 GiB reserved "
                        "in total by PyTorch)")
    assert old.capacity_gib == pytest.approx(31.75) and old.reserved_gib == pytest.approx(30.39)
    assert old.fragmentation_gib == pytest.approx(30.39 - 28.42)
    new = parse_message("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB. "
                        "GPU 0 has a total capacity of 9.68 GiB of which 95.75 MiB is free. "
                        "Including non-PyTorch memory, this process has 9.54 GiB memory in use. Of "
                        "the allocated memory 6.61 GiB is allocated by PyTorch, and 2.57 GiB is "
                        "reserved by PyTorch but unallocated.")
    assert new.allocated_gib == pytest.approx(6.61) and new.reserved_gib == pytest.approx(9.18)
    assert new.process_gib == pytest.approx(9.54)


def test_memory_summaries_from_issues():
    m = read_artifact(FIX / "memory_summary_pytorch_35901.txt")
    assert m.reserved_gib == pytest.approx(12420 / 1024) and m.peak_allocated_gib == pytest.approx(4877 / 1024)
    cut = read_artifact(FIX / "memory_summary_algoperf_425_criteo.txt")
    assert cut.reserved_gib is None and cut.allocated_gib == pytest.approx(10344 / 1024)
    with pytest.raises(InputError):
        parse_summary("|  PyTorch CUDA memory summary, device ID 0 |\n| Metric | Cur Usage |\n")


def test_fragmentation_case_gets_expandable_segments():
    m = read_artifact(FIX / "memory_summary_pytorch_35901.txt")
    r = diagnose(m, Config("llama-2-7b", "a100_sxm_40gb", 8, 2048, 8, {"zero": 3, "micro_batch": 1}))
    assert r["component"] == "fragmentation"
    assert any("expandable_segments" in a for a in r["advice"])


def test_restricted_unpickler_refuses_classes(tmp_path):
    bad = tmp_path / "snap.pickle"
    bad.write_bytes(pickle.dumps(OrderedDict(segments=[])))
    with pytest.raises(InputError):
        read_artifact(bad)
    res = CliRunner().invoke(app, ["diagnose", "oom", str(bad), "--model", "llama-2-7b"])
    assert res.exit_code == 2 and "refused" in res.output


def test_snapshot_of_plain_data_gives_totals_and_phase():
    frames_bwd = [{"filename": "torch/autograd/graph.py", "name": "_engine_run_backward", "line": 1}]
    snap = {"segments": [{"device": 0, "total_size": 3 << 30, "allocated_size": 2 << 30,
                          "blocks": [{"size": 2 << 30, "state": "active_allocated",
                                      "frames": frames_bwd}]}],
            "device_traces": [[{"action": "oom", "size": 1 << 30, "device_free": 0,
                                "frames": frames_bwd}]]}
    m = parse_snapshot(safe_load(pickle.dumps(snap), "x"))
    assert m.reserved_gib == 3 and m.allocated_gib == 2 and m.phase == "backward"
    assert m.requested_gib == 1


def test_memory_timeline_components(shared):
    m = read_artifact(shared / "snapshots" / "hta_memory_timeline.raw.gz")
    assert max(m.components, key=m.components.get) == "activation"
    assert sum(m.components.values()) == pytest.approx(m.allocated_gib)


def test_real_case_names_optimizer_and_a_change_that_fits(shared):
    cases = {c["id"]: c for c in json.loads((shared / "oom_cases.json").read_text())["cases"]}
    c = cases["oom_tatsu-lab_stanford_alpaca_223"]
    r = diagnose(parse_message(c["error_verbatim"]),
                 Config("llama-2-7b", "v100_sxm2_32gb", 5, 512, 40,
                        {"zero": 3, "micro_batch": 1, "recompute": "none", "flash_attention": False},
                        "fsdp", {"precision": "fp16_mixed"}))
    assert r["component"] == "optimizer"
    assert r["changes"] and all(ch["with_excess_gib"] <= 0.95 * ch["capacity_gib"] for ch in r["changes"])
    f = [(ch["tier"], ch["gpu_time_factor"]) for ch in r["changes"]]
    assert f == sorted(f)                     # oomfixes.rank: tier, then GPU-time per token


def test_diagnose_leaves_the_callers_config_as_given(shared):
    # the artifact's capacity is used for this diagnosis only: a second artifact from another
    # GPU is judged at its own capacity and still gets the capacity warning
    cases = {c["id"]: c for c in json.loads((shared / "oom_cases.json").read_text())["cases"]}
    msg = parse_message(cases["oom_tatsu-lab_stanford_alpaca_223"]["error_verbatim"])
    cfg = Config("llama-2-7b", "a100_sxm_80gb", 8, 512, 64, {"zero": 3, "micro_batch": 1}, "fsdp")
    first = diagnose(msg, cfg)
    assert cfg.capacity_gib is None
    assert first["capacity_gib"] == pytest.approx(msg.capacity_gib)
    assert any("lists 80 GiB" in w for w in first["warnings"])
    again = diagnose(msg, cfg)
    assert again["warnings"] == first["warnings"]


def test_summary_without_totals_exits_2(tmp_path):
    head = (FIX / "memory_summary_vissl_480.txt").read_text().split("| Allocated memory")[0]
    f = tmp_path / "summary.txt"
    f.write_text(head)
    res = CliRunner().invoke(app, ["diagnose", "oom", str(f)])
    assert res.exit_code == 2 and "Allocated memory" in " ".join(res.output.split())


def test_summary_alone_names_fragmentation_without_a_job():
    res = CliRunner().invoke(app, ["diagnose", "oom", str(FIX / "memory_summary_pytorch_35901.txt")])
    assert res.exit_code == 0 and "cause: fragmentation" in res.output
    res = CliRunner().invoke(app, ["diagnose", "oom", str(FIX / "memory_summary_vissl_480.txt")])
    assert res.exit_code == 0 and "cause: not decidable" in res.output


def test_phase_from_a_pasted_traceback():
    tb = ('Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
          '    loss.backward()\n  File "/usr/lib/python3/site-packages/torch/autograd/__init__.py",'
          ' line 200, in backward\n    Variable._execution_engine.run_backward(\n'
          'torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; '
          '15.78 GiB total capacity; 14.28 GiB already allocated; 6.69 MiB free; 14.32 GiB '
          'reserved in total by PyTorch)')
    assert parse_message(tb).phase == "backward"
    step = tb.replace("loss.backward()", "optimizer.step()").replace(
        "torch/autograd/__init__.py", "torch/optim/adamw.py").replace("in backward", "in step")
    assert parse_message(step).phase == "optimizer step"
    assert parse_message(tb.split("torch.cuda.")[1]).phase is None


def test_megatron_memory_line(shared):
    m = read_artifact(shared / "logs/issues/megatron_lm_756_mixtral8x7b_16xH100.txt")
    assert m.source.startswith("Megatron") and not m.oom
    assert m.allocated_gib == pytest.approx(54250.97802734375 / 1024)
    assert m.reserved_gib == pytest.approx(61480.0 / 1024)


def test_candidates_include_activation_offload_as_the_framework_runs_it():
    from trainplan.diagnose.oomplan import candidates
    from trainplan.spec.framework import get_framework
    ds = candidates({"zero": 3, "micro_batch": 1, "recompute": "none"}, 8, False, False,
                    get_framework("deepspeed"), 32)
    assert ("activation offload of 32 layers (recompute full)",
            {"zero": 3, "micro_batch": 1, "recompute": "full", "recompute_layers": 0,
             "offload_activations": 32}, 8) in ds
    meg = [c for c in candidates({"zero": 1, "recompute": "none"}, 8, True, False,
                                 get_framework("megatron"), 32) if "activation" in c[0]]
    assert [c[1]["offload_activations"] for c in meg] == [16, 30]
    assert not [c for c in candidates({"zero": 3}, 8, False, False, get_framework("torchtitan"),
                                      32) if "activation" in c[0]]


def test_optimizer_offload_from_stage_0_brings_the_stage_it_needs():
    """ZeRO-Offload needs a ZeRO stage (the layout rules refuse offload at stage 0), so the
    candidate from stage 0 is one change that sets both; a real DeepSpeed-Chat case (OPT-1.3B,
    one GPU, stage 0) then finds micro-batch down + offload as a pair that fits."""
    from trainplan.diagnose.oomplan import candidates, predict
    from trainplan.spec.framework import get_framework
    ds = candidates({"zero": 0, "micro_batch": 4}, 1, False, False, get_framework("deepspeed"), 24)
    offload = [c for c in ds if "offload optimizer" in c[0]]
    assert offload == [("zero 0 -> 1 and offload optimizer to CPU",
                        {"zero": 1, "micro_batch": 4, "offload_optimizer": True}, 1)]
    cfg = Config(model="llama-3.2-1b", gpu="a100_sxm_80gb", gpus=1, seq_len=512, global_batch=4,
                 strategy={"zero": 0, "micro_batch": 4}, implementation="deepspeed")
    assert predict(cfg, offload[0][1]).memory.host_gib_per_node > 0   # a valid layout


@pytest.mark.parametrize("gpus,node,more", [(1, 8, 2), (4, 8, 8), (5, 8, 16), (8, 8, 16),
                                            (12, 4, 24), (3, 4, 8)])
def test_more_gpus_rounds_to_whole_nodes(gpus, node, more):
    from trainplan.diagnose.oomplan import more_gpus
    assert more_gpus(gpus, node) == more
    assert more <= node or more % node == 0


def test_five_gpu_case_gets_a_larger_cluster_that_is_valid():
    """Twice 5 GPUs (10) spans two nodes of 8 without filling them, which a cluster refuses; the
    candidate is 16 GPUs, and it is evaluated (it used to fail validation and vanish)."""
    from trainplan.catalog import get_model
    from trainplan.diagnose.oomplan import candidates, predict
    from trainplan.spec.framework import get_framework
    st = {"zero": 3, "micro_batch": 1, "recompute": "none", "flash_attention": False}
    got = candidates(st, 5, False, True, get_framework("fsdp"),
                     get_model("llama-2-7b").decoder.layers, 8)
    label, strategy, n = got[-1]
    assert (label, n) == ("5 -> 16 GPUs", 16)
    cfg = Config(model="llama-2-7b", gpu="v100_sxm2_32gb", gpus=5, seq_len=512, global_batch=48,
                 strategy=st, implementation="fsdp", job={"precision": "fp16_mixed"})
    assert predict(cfg, {k: v for k, v in strategy.items() if v is not None}, n).gpus == 16


_FWD = [{"filename": "/home/u/model.py", "name": "forward", "line": 10}]
_BWD = [{"filename": "torch/autograd/graph.py", "name": "_engine_run_backward", "line": 1}]


def test_snapshot_of_a_process_on_two_gpus_reads_the_one_that_ran_out():
    # device_map="auto": one process drives GPUs 0 and 1; the OOM is on GPU 1 (device_traces[1])
    g = 1 << 30
    snap = {"segments": [
        {"device": 0, "total_size": 30 * g, "allocated_size": 29 * g,
         "blocks": [{"size": 29 * g, "state": "active_allocated", "frames": _FWD}]},
        {"device": 1, "total_size": 38 * g, "allocated_size": 30 * g,
         "blocks": [{"size": 30 * g, "state": "active_allocated", "frames": _BWD}]}],
        "device_traces": [[], [{"action": "oom", "size": 2 * g, "device_free": g // 2, "frames": _BWD}]]}
    m = parse_snapshot(safe_load(pickle.dumps(snap), "x"))
    assert (m.device, m.reserved_gib, m.allocated_gib, m.requested_gib) == ("GPU 1", 38, 30, 2)
    assert m.components == {"live_from_backward": 30} and any("GPUs 0, 1" in n for n in m.notes)
    no_oom = dict(snap, device_traces=[[], []])           # without an OOM: the most reserved GPU
    assert parse_snapshot(no_oom).device == "GPU 1"
    assert parse_snapshot(snap["segments"]).reserved_gib == 38   # torch.cuda.memory_snapshot()'s list


def test_pytorch_2_0_snapshot_frames_under_history_give_phases():
    g = 1 << 30
    snap = {"segments": [{"device": 0, "total_size": 20 * g, "allocated_size": 18 * g, "blocks": [
        {"size": 12 * g, "state": "active_allocated", "history": [{"addr": 1, "real_size": 12 * g, "frames": _FWD}]},
        {"size": 6 * g, "state": "active_allocated", "history": [{"addr": 2, "real_size": 6 * g, "frames": _BWD}]}]}],
        "device_traces": [[{"action": "oom", "size": g, "device_free": 0, "frames": _BWD}]]}
    m = parse_snapshot(safe_load(pickle.dumps(snap), "x"))
    assert m.components == {"live_from_forward": 12, "live_from_backward": 6}


def test_snapshot_with_a_non_numeric_size_exits_2(tmp_path):
    bad = tmp_path / "snap.pickle"
    bad.write_bytes(pickle.dumps({"segments": [{"device": 0, "total_size": "x"}]}))
    res = CliRunner().invoke(app, ["diagnose", "oom", str(bad)])
    assert res.exit_code == 2 and "total_size" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("events", [
    [[0, 1, "x", 3]],                                     # bytes not a number
    [[0, 1, 5, 3], ["a", 1, 5, 3]],                       # times that cannot be sorted
    [[0, 1, None, 3]],
    [[i, 1, 10, 1] for i in range(150)] + [[151, 1]],     # a short event past the first 100
])
def test_malformed_timeline_event_exits_2(tmp_path, events):
    f = tmp_path / "mem.raw.json"
    f.write_text(json.dumps(events))
    res = CliRunner().invoke(app, ["diagnose", "oom", str(f)])
    assert res.exit_code == 2 and "memory timeline event" in res.output, res.output


def test_a_whole_training_log_is_read_around_its_message():
    # the whole log of a run that died, not a pasted line: the message and traceback are at the end
    import tracemalloc
    tb = ('Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
          '    loss.backward()\n'
          'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.37 GiB. GPU 7 has a total '
          'capacity of 139.72 GiB of which 952.69 MiB is free.\n')
    log = " iteration 5/ 100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0 |\n" * 100_000 + tb
    tracemalloc.start()
    m = parse_message(log)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (m.requested_gib, m.capacity_gib, m.phase) == (pytest.approx(9.37), pytest.approx(139.72), "backward")
    assert peak < len(log) / 4, f"{peak / 1e6:.1f} MB to read a {len(log) / 1e6:.1f} MB log"
