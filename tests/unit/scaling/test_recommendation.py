"""`trainplan scale`: one recommended law with a range, combinable budgets, the planner's MFU with
or without --gpus, --epochs honoured, a proposed architecture that `trainplan plan` takes, and
output that stays inside 80 columns."""

import json

import pytest

from trainplan.scaling import compute_optimal, flops_from_budget
from trainplan.scaling.architecture import propose_architecture
from trainplan.scaling.budget import HOURS_PER_DAY, default_gpus
from trainplan.scaling.recommendation import recommend
from cli_helpers import runner



def cli(*args):
    from trainplan.cli import app

    return runner.invoke(app, list(args))


def test_json_has_recommended_and_range_of_the_other_laws():
    r = cli("scale", "--flops", "5.76e23", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["recommended"]["law"] == "epoch2024" and "Besiroglu" in d["recommended"]["why"]
    rows = {a["law"]: a for a in d["allocations"]}
    inside = [rows[x] for x in d["range"]["laws"]]
    assert "epoch2024" not in d["range"]["laws"] and "kaplan2020" in d["range"]["excluded"]
    assert d["range"]["n_params"]["min"] == min(a["n_params"] for a in inside)
    assert d["range"]["tokens"]["max"] == max(a["tokens"] for a in inside)
    assert d["architecture"]["n_params"] == pytest.approx(d["recommended"]["n_params"], rel=0.1)


def test_a_fitted_law_is_recommended_over_the_default():
    rows = compute_optimal(1e22)
    assert recommend(rows).recommended.law == "epoch2024"
    assert recommend(rows, fitted="hoffmann2022-a1").recommended.law == "hoffmann2022-a1"
    only = recommend(rows[:1])
    assert only.recommended is rows[0] and "n_params" not in only.range


@pytest.mark.parametrize("n", [3e8, 1.5e9, 8e9, 7e10, 4e11])
def test_architecture_matches_n_and_published_shapes(n):
    a = propose_architecture(n)
    assert a.n_params == pytest.approx(n, rel=0.05)
    assert a.hidden == a.heads * a.head_dim and a.heads % a.kv_heads == 0
    assert 3.0 <= a.ffn_hidden / a.hidden <= 4.0
    assert 50 <= a.aspect_ratio <= 200          # Kaplan et al. 2020 Fig. 5's flat region
    from trainplan.costmodel.params import model_params
    from trainplan.spec.model import Model, Stack

    exact = model_params(Model(name="x", stacks=(Stack(**a.stack()),))).total
    assert exact == pytest.approx(a.n_params)


def test_llama3_8b_size_gives_llama3_8b_shape():
    a = propose_architecture(8.03e9)
    assert (a.layers, a.hidden, a.heads, a.kv_heads, a.ffn_hidden, a.vocab) == (32, 4096, 32, 8, 14336, 128256)


def test_emitted_model_runs_through_plan(tmp_path):
    from trainplan.costmodel.params import model_params
    from trainplan.services.jobfile import build_inputs, read_file

    out = tmp_path / "model.toml"
    r = cli("scale", "--days", "20", "--gpus", "64", "--gpu", "h100_sxm", "--emit-model", str(out), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["emitted_model"] == str(out)
    n = d["recommended"]["n_params"]
    inputs = build_inputs(read_file(out))
    assert model_params(inputs.model).total == pytest.approx(n, rel=0.10)
    # the job spends the budget with the shape proposed: D = C / 6N of that shape
    total = model_params(inputs.model).total
    assert inputs.job.tokens == pytest.approx(d["budget"]["flops"] / (6 * total), rel=1e-5)
    assert inputs.job.tokens == pytest.approx(d["recommended"]["tokens"], rel=0.10)
    assert inputs.cluster.gpus == 64
    # the batch the budget's MFU was searched at travels with the model (1,024 sequences here;
    # one per 4 GPUs above 1,024 GPUs), so `plan FILE` plans the run the budget priced
    from trainplan.search.representative import representative_batch
    assert inputs.job.global_batch == representative_batch(64) == 1024
    assert representative_batch(16384) == 4096
    p = cli("plan", str(out), "--json")
    assert p.exit_code == 0, p.output


def test_emit_model_refuses_a_symlink(tmp_path):
    target = tmp_path / "t.toml"
    target.write_text("keep")
    link = tmp_path / "l.toml"
    link.symlink_to(target)
    r = cli("scale", "--flops", "1e22", "--emit-model", str(link))
    assert r.exit_code == 2 and "emit-model" in r.output and target.read_text() == "keep"


def test_budgets_combine_and_the_tightest_binds():
    days = flops_from_budget(deadline_days=30, gpus=256, gpu="h100_sxm", mfu=0.5)
    hours = 30 * HOURS_PER_DAY * 256
    rich = flops_from_budget(deadline_days=30, gpus=256, gpu="h100_sxm", dollars=hours * 100, mfu=0.5)
    poor = flops_from_budget(deadline_days=30, gpus=256, gpu="h100_sxm", dollars=1e5, mfu=0.5)
    assert rich.kind == "deadline" and rich.flops == pytest.approx(days.flops)
    assert poor.kind == "dollars" and poor.flops < days.flops
    assert poor.gpu_hours == pytest.approx(1e5 / poor.usd_per_gpu_hour)
    assert poor.days == pytest.approx(poor.gpu_hours / 24 / 256) and "--dollars" in poor.bound
    capped = flops_from_budget(flops=1e21, deadline_days=30, gpus=256, gpu="h100_sxm", mfu=0.5)
    assert capped.kind == "flops" and capped.flops == 1e21 and set(capped.constraints) == {"flops", "deadline"}


def test_cli_days_and_usd_aliases_say_which_bound():
    r = cli("scale", "--days", "30", "--gpus", "256", "--gpu", "h100", "--usd", "1e5", "--mfu", "0.5")
    assert r.exit_code == 0, r.output
    assert "binds: --dollars" in r.output and "FLOPs each budget allows" in r.output


def test_mfu_from_the_planner_with_or_without_gpus():
    b = flops_from_budget(gpu_hours=1e6, gpu="h100_sxm")
    assert b.mfu_gpus == default_gpus(1e6) and b.mfu_source.startswith("cost model")
    with_gpus = flops_from_budget(gpu_hours=1e6, gpu="h100_sxm", gpus=b.mfu_gpus)
    assert with_gpus.mfu == pytest.approx(b.mfu)
    assert 8 <= default_gpus(1.0) <= default_gpus(1e6) <= default_gpus(1e12) == 16384
    r = cli("scale", "--gpu-hours", "1e6", "--gpu", "h100_sxm")
    assert r.exit_code == 0 and "MFU:" in r.output and "assumed" in r.output


def test_repeat_honours_epochs():
    from trainplan.scaling.repeated_data import planned_epochs

    r2, r3 = (json.loads(cli("scale", "repeat", "--unique-tokens", "1e11", "--epochs", e, "--flops", "1e22",
                             "--json").output)["planned"] for e in ("2", "3"))
    assert r3["tokens"] == pytest.approx(3e11) and r2["tokens"] == pytest.approx(2e11)
    assert r3["n_params"] == pytest.approx(1e22 / (6 * 3e11))
    assert r3["loss_vs_best"] >= 0 and r2["loss_vs_best"] >= 0
    p = planned_epochs(1e22, 1e11, 3)
    assert p.effective_tokens < p.tokens and p.loss == pytest.approx(r3["loss"])
    text = cli("scale", "repeat", "--unique-tokens", "1e11", "--epochs", "3", "--flops", "1e22").output
    assert "your plan: 3 epochs" in text


@pytest.mark.parametrize("args", [["--flops", "5.76e23"], ["--days", "30", "--gpus", "256", "--gpu", "h100"],
                                  ["repeat", "--unique-tokens", "1e11", "--epochs", "3", "--flops", "1e22"]])
def test_output_fits_80_columns_and_ids_are_not_cut(args):
    r = cli("scale", *args)
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    if "repeat" not in args:
        assert "hoffmann2022-a3-unrounded" in r.output.replace("\n", " ")   # the legend, whole
        table = [ln for ln in r.output.splitlines() if ln.startswith("│ H22-3u")]
        assert len(table) == 1                                            # one line per law


def test_assumed_cluster_grows_until_a_layout_fits(monkeypatch):
    search = pytest.importorskip("trainplan.search")
    monkeypatch.setattr(search, "best_mfu", lambda gpu, gpus, n: (0.5, "ok", 0.9, 0.95) if gpus >= 64 else (0.0, "no fit", 0.0, 0.0))
    b = flops_from_budget(gpu_hours=100, gpu="h100_sxm")
    assert b.mfu == 0.5 and b.mfu_gpus == 64
    # the hours that train are those the layout's goodput leaves (failures, restarts, checkpoints)
    assert b.goodput == 0.9 and b.flops == pytest.approx(100 * 3600 * b.peak_flops_per_s * 0.5 * 0.9 * 0.95)
    assert "x MFU 0.5 x goodput 0.9 x 6ND share 0.95 =" in b.explanation
    monkeypatch.setattr(search, "best_mfu", lambda gpu, gpus, n: (0.0, "no fit", 0.0, 0.0))
    b = flops_from_budget(gpu_hours=100, gpu="h100_sxm")
    assert b.mfu == 0.40 and "no layout fits" in b.mfu_source
    assert b.goodput is None and "failures, checkpoints and attention FLOPs not counted" in b.explanation


def test_job_file_text_escapes_a_law_name():
    import tomllib

    from trainplan.scaling.architecture import job_file_text

    text = job_file_text(propose_architecture(1e9), 2e10, law='x"\n[cluster]\ngpus = 1\n#')
    d = tomllib.loads(text)
    assert "cluster" not in d and d["model"]["source"].startswith("trainplan scale (x\"\n[cluster]")


def test_a_cycling_mfu_is_priced_where_the_model_it_buys_reaches_it():
    """The MFU of the model a budget buys jumps with the layouts its layer count allows; the
    fixed-point iteration cycled and kept the last iterate (12% from a 607B model while a 299B
    one was proposed). consistent_mfu prices at the largest m whose model reaches m."""
    from trainplan.scaling.budget import consistent_mfu

    def mfu_of(m):          # a step function: bigger budgets buy models that run slower
        reached = 0.55 if m < 0.5 else 0.45
        return reached, f"model at {m:.3f}", 64

    m, src, gpus = consistent_mfu(mfu_of, 0.4)
    assert 0.49 < m < 0.5 and mfu_of(m)[0] >= m and gpus == 64
    assert "priced at 0.4" in src
    smooth = consistent_mfu(lambda m: (0.3 + 0.2 * (m < 1.0), "flat", 8), 0.4)
    assert smooth[0] == 0.5                  # a fixed point is returned as found


def test_kaplans_non_embedding_n_gets_its_embeddings_on_top():
    """Under Kaplan et al. 2020 N counts no embeddings: the proposal matched the total and came
    out 5.5% short of N without embeddings."""
    from trainplan.scaling.architecture import propose_architecture
    a = propose_architecture(41.7e9, non_embedding=True)
    assert abs(a.non_embedding_params / 41.7e9 - 1) < 0.05
    assert a.n_params > 41.7e9 and a.matched_params == a.non_embedding_params
    b = propose_architecture(41.7e9)
    assert abs(b.n_params / 41.7e9 - 1) < 0.05 and b.matched_params == b.n_params
