"""QA regressions of issue 10's fuzzing: each input that raised an exception other than
trainplan's own, wrote a non-finite or negative quantity, or ran without bound, now fails with
an InputError (CLI exit 2, one line, no traceback) or gives a finite answer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.errors import InputError

runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "src" / "trainplan" / "examples"


def _run(args):
    return runner.invoke(app, [str(a) for a in args])


def _bad(args, *words):
    r = _run(args)
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    flat = " ".join(r.output.split())
    for w in words:
        assert w in flat, r.output
    return flat


def _strict(text: str):
    def no_constant(c):
        raise ValueError(f"non-JSON constant {c}")
    return json.loads(text, parse_constant=no_constant)


def test_inference_sizing_at_huge_budget_is_bounded():
    _bad(["scale", "inference", "--inference-tokens", "1e13", "--flops", "1e308"], "--flops", "less than or equal to")
    # at the largest budget accepted the lifetime-optimal model (4e16 parameters) is beyond the
    # sizes a law supports: refused, naming the budget; just inside, every figure is finite
    _bad(["scale", "inference", "--inference-tokens", "1e13", "--flops", "1e35"], "flops", "1e+16 parameters")
    r = _run(["scale", "inference", "--inference-tokens", "1e13", "--flops", "1e33", "--json"])
    assert r.exit_code == 0, r.output
    out = _strict(r.output)
    assert out["n_params"] > 0 and out["tokens"] > 0
    assert all(math.isfinite(v) for v in out.values() if isinstance(v, float))


@pytest.mark.parametrize("target", [1.8172000000000001, 1.817200001, 1e300])
def test_inference_sizing_unreachable_loss_target(target):
    from trainplan.scaling.inference_sizing import inference_aware
    with pytest.raises(InputError, match="target_loss"):
        inference_aware(1e13, target_loss=target)


@pytest.mark.parametrize("n", [300, 5000])
def test_long_model_name_is_an_input_error(n):
    _bad(["estimate", "--model", "a" * n], "model")


def test_huge_job_file_is_refused_before_parsing(tmp_path):
    p = tmp_path / "big.toml"
    p.write_text('[model]\npreset = "' + "a" * (5 * 2**20) + '"\n')
    _bad(["estimate", p], "job file", "MiB")


def test_preset_string_of_a_megabyte_is_refused(tmp_path):
    p = tmp_path / "j.toml"
    p.write_text('[model]\npreset = "' + "a" * 1_000_000 + '"\n')
    _bad(["estimate", p], "model", "1,000,000 characters")


@pytest.mark.parametrize("space", [dict(max_vp=10**9), dict(max_micro_batch=10**12),
                                   dict(tp=(2**62,)), dict(pp=(10**30,)),
                                   dict(cp=tuple(range(1, 200))), dict(max_tp=2**70)])
def test_unbounded_search_space_values(space):
    import trainplan
    with pytest.raises(InputError, match="space"):
        trainplan.plan("llama-3-8b", dict(tokens=1e12), gpus=8, space=space)


@pytest.mark.parametrize("preset", ["llava-1.5-7b", "qwen2-vl-7b", "qwen-vl-7b"])
@pytest.mark.parametrize("value", ["abc", float("nan"), float("inf"), 1e308, [1], {}])
def test_vlm_config_with_bad_vision_field(preset, value):
    import copy

    from trainplan.catalog.hf_config import model_from_hf_config
    from trainplan.catalog.models import _index
    cfg = copy.deepcopy(_index()[preset]["config"])
    key = "vision_config" if "vision_config" in cfg else "visual"
    for field in list(cfg[key]):
        c = copy.deepcopy(cfg)
        c[key][field] = value
        try:
            model_from_hf_config(c, name="x")
        except InputError:
            pass


def test_audit_with_huge_samples(tmp_path):
    text = (EXAMPLES / "source_case_claims.toml").read_text()
    p = tmp_path / "c.toml"
    p.write_text(text.replace("samples = 20e6 ", "samples = 1e308 "))
    _bad(["audit", p], "samples")


@pytest.mark.parametrize("content,line", [
    ('{"length": 5}\n{"length": "1.2.3"}\n', 2),
    ('{"length": 5}\n{"length": 1.2.3}\n', 2),
    ('{"length": 5}\n{"length": 9\n', 2),
    ('{"length": 5}\nnot json\n', 2),
    ('{"length": 5}\n[5]\n', 2),
    ('{"length": 5}\n{"length": {"length": 7}}\n', 2),
])
def test_corrupt_jsonl_names_the_line(tmp_path, content, line):
    p = tmp_path / "l.jsonl"
    p.write_text(content)
    _bad(["data", "lengths", p], f"l.jsonl:{line}", "--skip-bad")
    r = _run(["data", "lengths", p, "--skip-bad", "--json"])
    assert r.exit_code == 0, r.output
    out = _strict(r.output)
    assert out["samples"] == 1 and out["skipped"] == {"corrupt rows (--skip-bad)": 1}


def test_nested_length_key_is_not_a_sample(tmp_path):
    from trainplan.data.lengths import read_lengths
    p = tmp_path / "l.jsonl"
    p.write_text('{"length": 5}\n{"x": {"length": 7}}\n{"length": 9}\n')
    d = read_lengths(p)
    assert d.lengths.tolist() == [5, 9] and d.skipped == {"missing length": 1}


def test_lora_larger_than_the_model_is_never_negative():
    from trainplan.services.estimate import estimate
    small = estimate("llama-3-8b", job=dict(trainable="lora", lora_rank=16), gpus=8).memory
    big = estimate("llama-3-8b", job=dict(trainable="lora", lora_rank=8192), gpus=8).memory
    for m in (small, big):
        for k in ("weights_gib", "gradients_gib", "optimizer_gib", "total_gib"):
            assert getattr(m, k) >= 0, (k, getattr(m, k))
    assert big.weights_gib > small.weights_gib          # the adapters add to the frozen base
    with pytest.raises(InputError, match="lora_rank"):
        estimate("llama-3-8b", job=dict(trainable="lora", lora_rank=10**9), gpus=8)


def test_zero_failure_rate_writes_strict_json(tmp_path):
    p = tmp_path / "j.toml"
    p.write_text('[model]\npreset = "llama-3-8b"\n[cluster]\ngpus = 8\n'
                 'failure_rate_per_gpu_hour = 0\n')
    r = _run(["estimate", p, "--json"])
    assert r.exit_code == 0, r.output
    _strict(r.output)


def test_strict_json_writes_null_for_non_finite():
    from trainplan.io.jsonout import dumps
    import numpy as np
    text = dumps({"a": float("inf"), "b": [float("nan"), np.float64(2.5)], "c": (1, np.int64(3))})
    assert _strict(text) == {"a": None, "b": [None, 2.5], "c": [1, 3]}


def test_bootstrap_is_bounded():
    _bad(["scale", "fit", EXAMPLES / "pilot_runs.csv", "--bootstrap", "100000000"],
         "bootstrap", "100,000")


def test_fit_out_needs_force_and_a_regular_file(tmp_path):
    import os
    csv = EXAMPLES / "pilot_runs.csv"
    law = tmp_path / "law.json"
    assert _run(["scale", "fit", csv, "--bootstrap", "0", "--out", law]).exit_code == 0
    before = law.read_text()
    _bad(["scale", "fit", csv, "--bootstrap", "0", "--out", law], "--force")
    link = tmp_path / "link.json"
    link.symlink_to(law)
    _bad(["scale", "fit", csv, "--bootstrap", "0", "--out", link, "--force"], "symbolic link")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _bad(["scale", "fit", csv, "--bootstrap", "0", "--out", fifo, "--force"], "FIFO")
    _bad(["scale", "fit", csv, "--bootstrap", "0", "--out", "/dev/null", "--force"], "device")
    assert law.read_text() == before and link.is_symlink()
    assert _run(["scale", "fit", csv, "--bootstrap", "0", "--out", law, "--force"]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "law.json", "link.json"]


@pytest.mark.parametrize("value", ["[red]x[/red]", ":smile:", "[bold]:thumbs_up:"])
def test_error_messages_print_user_values_literally(value):
    r = _run(["estimate", "--model", value])
    assert r.exit_code == 2 and value in r.output, r.output


# --- found by the fuzz suite (tests/fuzz, benchmarks/fuzz.py) ---------------------------------

def test_annotation_image_pair_of_one_number(tmp_path):
    from trainplan.catalog.vlm import resolve_model
    from trainplan.data.lengths import read_lengths
    p = tmp_path / "a.jsonl"
    p.write_text('{"text_tokens": 5, "images": [[448, 448]]}\n{"text_tokens": 9, "images": [[5, 5], [6]]}\n')
    d = read_lengths(p, None, resolve_model("llava-1.5-7b"))
    assert len(d.lengths) == 1 and d.skipped == {"image size <= 0 or missing": 1}


@pytest.mark.parametrize("kw", [dict(batch_size="x"), dict(buckets=[1]), dict(capacity=2.5),
                                dict(seed=-1), dict(batch_size=True)])
def test_padding_analysis_checks_its_arguments(kw):
    from trainplan.data.padding import analyze
    with pytest.raises(InputError):
        analyze([5, 7, 9], **kw)


@pytest.mark.parametrize("call", [
    lambda s: s.optimal_allocation(1e308), lambda s: s.optimal_allocation(5e-324),
    lambda s: s.planned_epochs(1e22, 1e10, 5e-324), lambda s: s.data_constrained_optimum(1e22, 1e-300),
    lambda s: s.batch_advice(1e22, seq_len="x"), lambda s: s.multimodal_advice(1e22, fusion=[]),
    lambda s: s.propose_architecture(1e9, vocab=1e-308), lambda s: s.inference_aware("x", flops=1e22),
    lambda s: s.flops_from_budget(gpu_hours=1e5, gpu="h100", gpus=[8]),
    lambda s: s.batch_advice(1e22, loss=1e-308),
    lambda s: s.flops_from_budget(dollars=1e6, gpu="h100_sxm", gpus=8, usd_per_gpu_hour=1e-308),
])
def test_scaling_inputs_out_of_range(call):
    import trainplan.scaling as s
    with pytest.raises(InputError):
        call(s)


def test_fit_that_diverges_is_an_input_error():
    from trainplan.scaling import DEFAULT_LAW, fit_law, synthetic_runs
    from trainplan.scaling.runs import Runs
    base = synthetic_runs(DEFAULT_LAW, 12, noise=0.0, seed=0)
    flat = Runs(n_params=base.n_params, tokens=base.tokens, loss=base.loss[::-1].copy(), source="reversed")
    with pytest.raises(InputError, match="exponent is <= 0"):      # losses rise with N, D
        fit_law(flat, n_bootstrap=5, max_starts=8)
    r = fit_law(base, n_bootstrap=5, max_starts=8)
    assert r.law.alpha > 0 and r.law.beta > 0 and isinstance(r.law.G, float)
    band = r.allocation(1e22)
    assert band.n_params > 0 and band.tokens > 0


@pytest.mark.parametrize("gpus", [2**64, [8, 2**40], "8.." + str(2**70)])
def test_plan_gpu_counts_are_bounded(gpus):
    import trainplan
    with pytest.raises(InputError, match="gpus"):
        trainplan.plan("llama-2-7b", dict(tokens=1e12), gpus=gpus)


@pytest.mark.parametrize("job", [dict(seq_len=10**30), dict(tokens=1e300), dict(global_batch=2**40),
                                 dict(samples=5e-324)])
def test_spec_numbers_are_bounded(job):
    from trainplan.services.estimate import estimate
    with pytest.raises(InputError):
        estimate("llama-3-8b", job=job)


def test_never_interrupted_job_has_no_mtbf():
    from trainplan.services.estimate import estimate
    t = estimate("llama-3-8b", job=dict(tokens=1e12), cluster=dict(failure_rate_per_gpu_hour=0)).totals
    assert t.mtbf_hours is None and t.checkpoint_interval_hours is None and t.goodput == 1.0


@pytest.mark.parametrize("model", ["qwen2-vl-7b", "llava-1.5-7b", "qwen-vl-7b"])
def test_image_smaller_than_a_patch(model):
    from trainplan.services.estimate import estimate
    e = estimate(model, job=dict(image_size=1, tokens=1e10))
    assert math.isfinite(e.time.step_s) and e.time.step_s > 0


def test_budget_beyond_the_flops_bound_is_an_input_error():
    from trainplan.scaling import flops_from_budget
    with pytest.raises(InputError, match="FLOPs"):
        flops_from_budget(gpu_hours=1e29, gpu="h100_sxm", gpus=8)


def test_audit_claims_use_the_spec_bounds(tmp_path):
    text = (EXAMPLES / "source_case_claims.toml").read_text()
    p = tmp_path / "c.toml"
    p.write_text(text.replace("global_batch = 1024", "global_batch = 1000000000000000000000000000000"))
    _bad(["audit", p], "global_batch")


def test_tiny_reals_are_refused_even_where_a_field_has_its_own_upper_bound():
    """packing_efficiency (0, 1] keeps its own upper bound, but 1e-300 would make the step count
    infinite (found by benchmarks/fuzz.py): every non-zero real below 1e-30 is refused."""
    from trainplan.errors import InputError
    from trainplan.services.estimate import estimate

    with pytest.raises(InputError, match="packing_efficiency"):
        estimate(model="llama-2-7b", gpu="h100_sxm", gpus=8,
                 job={"packing_efficiency": 1e-300, "tokens": 1e12})


def test_budget_reads_numeric_strings_as_numbers():
    """A budget given as text ('100') is read as the number, never divided as a string
    (TypeError found by benchmarks/fuzz.py); non-numeric text is an InputError."""
    import trainplan.scaling as s
    from trainplan.errors import InputError

    as_text = s.flops_from_budget(gpu_hours="100", gpu="h100_sxm").to_dict()
    as_number = s.flops_from_budget(gpu_hours=100.0, gpu="h100_sxm").to_dict()
    assert as_text == as_number
    with pytest.raises(InputError, match="dollars"):
        s.flops_from_budget(dollars="abc", gpu="h100_sxm")


def test_a_cluster_that_never_fails_prints_its_checkpoint_without_an_interval(tmp_path):
    """failure_rate_per_gpu_hour = 0 (and no spot): no MTBF, no interval; the table said
    neither and crashed formatting None. It now says so, with the checkpoint's size."""
    job = tmp_path / "job.toml"
    job.write_text('model = "llama-3-8b"\n[job]\ntokens = 1e10\n'
                   '[cluster]\ngpu = "h100"\ngpus = 8\nfailure_rate_per_gpu_hour = 0\n')
    r = _run(["estimate", job])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "no interruptions assumed" in flat and "GiB written in" in flat
    out = _strict(_run(["estimate", job, "--json"]).output)
    assert out["totals"]["mtbf_hours"] is None and out["totals"]["goodput"] == 1.0
    assert out["checkpoint"]["writers"] == 1 and out["checkpoint"]["gib"] > 0


@pytest.mark.parametrize("extra, words", [
    ("storage_GBps_per_node = 1e-9", "leaves no useful time"),     # printed nan days, exit 0
    ("spot_mtbf_hours = 0.01", "leaves no useful time"),           # 2.8e9 days, exit 0
    ("failure_rate_per_gpu_hour = 2", "failure_rate_per_gpu_hour"),
])
def test_a_cluster_on_which_the_run_never_finishes_is_refused(tmp_path, extra, words):
    job = tmp_path / "job.toml"
    job.write_text(f'model = "llama-3-8b"\n[job]\ntokens = 1e11\n'
                   f'[cluster]\ngpu = "h100"\ngpus = 8\n{extra}\n')
    for cmd in ("estimate", "plan"):
        flat = _bad([cmd, job], words)
        assert "nan" not in flat.lower().replace("nano", "")
