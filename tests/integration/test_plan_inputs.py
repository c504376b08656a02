"""QA: `trainplan plan` and `trainplan.plan()` with bad search settings, GPU lists and output
folders exit 2 / raise InputError naming the field; never a traceback."""

from __future__ import annotations

import pytest

import trainplan
from trainplan.cli import app
from trainplan.errors import InputError
from cli_helpers import assert_exits_2, runner

PLAN = ["plan", "--model", "llama-2-7b", "--gpus", "8"]


def _bad(args, *words):
    r = runner.invoke(app, [str(a) for a in args])
    assert_exits_2(r)
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    flat = " ".join(r.output.split())            # rich wraps long messages
    for w in words:
        assert w in flat, r.output
    return r.output


@pytest.mark.parametrize("line,words", [
    ('gpus = [8, "x"]', ["gpus", "whole GPU counts"]),
    ('max_tp = "x"', ["search.max_tp"]),
    ('top = "x"', ["search.top"]),
    ('headroom_gib = "x"', ["search.headroom_gib"]),
    ('deadline_days = "x"', ["search.deadline_days"]),
    ('budget_usd = -5.0', ["search.budget_usd"]),
    ('out = 5\nemit = "megatron"', ["search.out"]),
])
def test_search_table_values(tmp_path, line, words):
    p = tmp_path / "job.toml"
    p.write_text(f'[model]\npreset = "llama-2-7b"\n[search]\n{line}\n')
    _bad(["plan", p], *words)


@pytest.mark.parametrize("extra,words", [
    (["--gpu", ""], ["--gpu"]),
    (["--gpu", ","], ["--gpu"]),
    (["--deadline-days", "nan", "--tokens", "1e11"], ["deadline_days", "positive"]),
    (["--budget-usd", "nan", "--tokens", "1e11"], ["budget_usd", "positive"]),
    (["--headroom-gib", "nan"], ["headroom_gib"]),
])
def test_plan_flags(extra, words):
    _bad(PLAN + extra, *words)


def test_emit_into_unusable_folders(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _bad(PLAN + ["--emit", "megatron", "--out", f / "sub"], "--out", "nothing was written")
    (tmp_path / "o" / "ds_config.json").mkdir(parents=True)
    _bad(PLAN + ["--framework", "deepspeed", "--emit", "deepspeed", "--out", tmp_path / "o", "--force"], "ds_config.json",
         "folder")


@pytest.mark.parametrize("kw", [
    dict(gpu=[]), dict(gpu=""), dict(gpus=[8, "x"]), dict(gpus=True), dict(top="x"),
    dict(top=2.5), dict(headroom_gib="x"), dict(headroom_gib=float("nan")),
    dict(tokens=1e12, deadline_days="x"), dict(tokens=1e12, deadline_days=float("nan")),
    dict(tokens=1e12, budget_usd="x"), dict(tokens=1e12, budget_usd=-1),
    dict(space=[1]), dict(space={"tpx": 1}), dict(space={"tp": (0,)}), dict(space={"pp": (0,)}),
    dict(space={"zero": (5,)}), dict(space={"recompute": ("bogus",)}),
    dict(space={"recompute_fractions": (2.0,)}), dict(cluster={"gpus": 8}), dict(job=[1]),
])
def test_api_plan_bad_arguments(kw):
    with pytest.raises(InputError):
        trainplan.plan("llama-2-7b", **kw)


def test_api_plan_narrowed_space_is_named():
    with pytest.raises(InputError, match="widen the search space"):
        trainplan.plan("llama-2-7b", space={"tp": (3,)})


def test_plan_refuses_job_settings_the_gpu_or_framework_cannot_run(tmp_path):
    """The same job checks as estimate: FlashAttention-3 off Hopper, Liger's fused linear
    cross-entropy under the measured plain-PyTorch accounting."""
    from cli_helpers import assert_exits_2, invoke
    import pytest
    import trainplan
    from trainplan.errors import InputError
    with pytest.raises(InputError, match="attention_kernel"):
        trainplan.plan("llama-3-8b", gpu="a100", gpus=8, seq_len=4096, global_batch=64,
                       tokens=1e9, attention_kernel="fa3")
    with pytest.raises(InputError, match="fused_ops"):
        trainplan.plan("llama-3-8b", gpu="h100", gpus=8, seq_len=4096, global_batch=64,
                       tokens=1e9, framework="pytorch", fused_ops=["linear_cross_entropy"])
    job = tmp_path / "job.toml"
    job.write_text('[model]\npreset = "llama-3-8b"\n[job]\nseq_len = 4096\nglobal_batch = 64\n'
                   'tokens = 1e9\nattention_kernel = "fa3"\n[cluster]\ngpu = "a100"\ngpus = 8\n')
    assert_exits_2(invoke("plan", str(job)), "job.attention_kernel", "Hopper")


def test_an_empty_emit_and_an_unsplittable_batch_are_named():
    """--emit "" wrote nothing with exit 0; on 7 GPUs the batch error named no working batch
    (the one-GPU data-parallel split it found leaves a 7-way model split no model has)."""
    from typer.testing import CliRunner

    from trainplan.cli import app
    r = CliRunner().invoke(app, ["plan", "--model", "llama-3-8b", "--gpus", "8", "--emit", ""])
    assert r.exit_code == 2 and "one or more of deepspeed" in r.output
    r = CliRunner().invoke(app, ["plan", "--model", "llama-3-8b", "--gpus", "7"])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "smallest change: global batch 1029" in flat


def test_a_misspelt_key_in_the_ignored_strategy_table_is_still_an_error(tmp_path):
    """plan ignores the job file's [strategy] (the search chooses), but checks it as estimate
    reads it: `tpp = 2` there is a typo to name, not a setting silently dropped."""
    head = '[model]\npreset = "llama-3-8b"\n[cluster]\ngpu = "h100"\ngpus = 8\n[strategy]\n'
    bad, good = tmp_path / "bad.toml", tmp_path / "good.toml"
    bad.write_text(head + "tpp = 2\n")
    good.write_text(head + "tp = 2\n")
    _bad(["plan", bad], "strategy.tpp", "did you mean tp")
    r = runner.invoke(app, ["plan", str(good), "--json"])
    assert r.exit_code == 0, r.output
