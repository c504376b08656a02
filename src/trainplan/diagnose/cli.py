"""``trainplan diagnose``: a real run's OOM artifacts, profiler traces and logs against the plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn, Optional

import typer

from trainplan.errors import TrainplanError

diagnose_app = typer.Typer(name="diagnose", no_args_is_help=True, add_completion=False,
                           help="Read a run's own artifacts (OOM message, memory summary or "
                                "snapshot, profiler trace, training log) against the plan.")


def _fail(e: BaseException) -> NoReturn:
    from trainplan.cli import print_error
    print_error(e)
    raise typer.Exit(2)


def _config(job_file, model, gpu, gpus, seq_len, global_batch, micro_batch, zero, tp, pp,
            recompute, implementation, precision, trainable):
    from trainplan.diagnose.oomplan import Config
    from trainplan.errors import InputError
    data = {}
    if job_file:
        from trainplan.jobfile import read_file
        data = read_file(job_file)
    m, c = data.get("model", {}) or {}, data.get("cluster", {}) or {}
    st = {k: v for k, v in (data.get("strategy", {}) or {}).items()}
    job = {k: v for k, v in (data.get("job", {}) or {}).items()}
    st.update({k: v for k, v in dict(zero=zero, tp=tp, pp=pp, micro_batch=micro_batch,
                                     recompute=recompute).items() if v is not None})
    job.update({k: v for k, v in dict(precision=precision, trainable=trainable).items() if v})
    model = model or m.get("preset") or m.get("hf_config")
    if not model:
        raise InputError("model", None, "a preset id or config.json (--model or the job file)")
    impl = implementation or job.pop("implementation", None) or "pytorch"
    seq = seq_len or job.pop("seq_len", None) or 4096
    gb = global_batch or job.pop("global_batch", None) or max(1, int(st.get("micro_batch", 1))) * (gpus or 1)
    return Config(model, gpu or c.get("gpu") or "h100_sxm", int(gpus or c.get("gpus") or 1),
                  int(seq), int(gb), st, impl, {k: v for k, v in job.items() if v is not None})


@diagnose_app.command("oom")
def oom(
    artifact: Path = typer.Argument(..., help="OOM message, memory_summary() text, snapshot "
                                              "pickle or memory-timeline JSON (.gz accepted)"),
    job_file: Optional[Path] = typer.Option(None, "--job", help="TOML/YAML job file"),
    model: Optional[str] = typer.Option(None, "--model", "-m"),
    gpu: Optional[str] = typer.Option(None), gpus: Optional[int] = typer.Option(None),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch"),
    zero: Optional[int] = typer.Option(None), tp: Optional[int] = typer.Option(None),
    pp: Optional[int] = typer.Option(None), recompute: Optional[str] = typer.Option(None),
    implementation: Optional[str] = typer.Option(None),
    precision: Optional[str] = typer.Option(None), trainable: Optional[str] = typer.Option(None),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Measured memory vs the plan by component; the cause, the phase, the changes that fit."""
    try:
        from trainplan.diagnose.oom import read_artifact
        from trainplan.diagnose.oomplan import diagnose
        meas = read_artifact(artifact)
        cfg = _config(job_file, model, gpu, gpus, seq_len, global_batch, micro_batch, zero, tp, pp,
                      recompute, implementation, precision, trainable)
        r = diagnose(meas, cfg)
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps(r, indent=1, default=str))
        return
    ms = r["measured"]
    typer.echo(f"measured ({ms['source']}): " + ", ".join(
        f"{k.replace('_gib', '')} {v:.2f} GiB" for k, v in ms.items() if k.endswith("_gib")))
    if r["fragmentation_gib"] is not None:
        typer.echo(f"fragmentation (reserved - allocated): {r['fragmentation_gib']:.2f} GiB")
    for k, v in ms.get("components", {}).items():
        typer.echo(f"  measured {k}: {v:.2f} GiB")
    typer.echo(f"plan [{r['layout']}] per GPU, of {r['capacity_gib']:.2f} GiB:")
    for k, v in r["predicted"].items():
        typer.echo(f"  {k:<12}{v:8.2f} GiB")
    typer.echo(f"beyond the plan: {r['excess_over_plan_gib']:.2f} GiB")
    typer.echo(f"component: {r['component']} - {r['reason']}")
    typer.echo(f"phase: {r['phase'] or 'not recorded in this artifact'}")
    for a in r["advice"]:
        typer.echo(f"advice: {a}")
    typer.echo("smallest changes that fit (ranked by GPU-time per step):" if r["changes"]
               else "no single or paired change fits: more GPUs of a larger memory")
    for c in r["changes"]:
        typer.echo(f"  {c['change']:<40} {c['memory_gib']:7.2f} GiB  step {c['step_s']:.3f} s "
                   f"(x{c['slowdown']:.2f} time, x{c['gpu_time_factor']:.2f} GPU-time)")


@diagnose_app.command("trace")
def trace(
    paths: list[Path] = typer.Argument(..., help="Kineto traces: .json/.json.gz files, folders "
                                                 "or a .tar.gz of ranks"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Per-rank step breakdown (kernel classes, exposed communication, idle and its cause),
    stragglers across ranks."""
    try:
        from trainplan.diagnose.ranks import load_ranks, stragglers
        from trainplan.diagnose.trace import CLASSES, hta_temporal, step_breakdown, summarize
        ranks = load_ranks(paths)
        out = []
        for r, rt in ranks:
            s = summarize(step_breakdown(rt))
            out.append({"rank": r, "file": Path(rt.path).name, "device": rt.device, **s,
                        "hta_temporal": hta_temporal(rt)})
        strag = stragglers(ranks)
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps({"ranks": out, "stragglers": strag}, indent=1))
        return
    for o in out:
        m = o["mean"]
        step = m["step_us"]
        typer.echo(f"rank {o['rank']} ({o['device']}): {o['steps']} steps, mean step "
                   f"{step / 1e3:.2f} ms (breakdown sums to {m['sum_us'] / 1e3:.2f} ms)")
        for k in CLASSES + ("idle",):
            if m[f"{k}_us"] > 0:
                typer.echo(f"  {k:<18}{m[f'{k}_us'] / 1e3:9.2f} ms {100 * m[f'{k}_us'] / step:6.1f}%")
        typer.echo(f"  comm overlapped  {m['comm_overlapped_us'] / 1e3:9.2f} ms (hidden under compute)")
        typer.echo(f"  idle causes: data-loader wait {m['idle_data_wait_us'] / 1e3:.2f} ms, host "
                   f"sync {m['idle_host_sync_us'] / 1e3:.2f} ms, launch-bound "
                   f"{m['idle_launch_bound_us'] / 1e3:.2f} ms")
        typer.echo("  heuristics (source doc): data wait > 5 ms/batch, communication > 15% of "
                   f"step: {', '.join(o['verdicts']) or 'none triggered'}")
    if strag:
        typer.echo(f"straggler: rank {strag['straggler']} (arrives last at collectives, "
                   f"{strag['straggler_lateness_us'] / 1e3:.2f} ms late in total; the others "
                   f"wait {strag['others_wait_us'] / 1e3:.2f} ms together over "
                   f"{strag['collectives_matched']} collectives)")


@diagnose_app.command("log")
def log(
    path: Path = typer.Argument(..., help="training log (or Megatron golden-values JSON)"),
    regex: Optional[str] = typer.Option(None, help="named groups step_s|step_ms, step, loss"),
    predicted_step_s: Optional[float] = typer.Option(None, "--predicted-step-s",
                                                     help="trainplan's predicted step time"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Step time, throughput, loss and loss scale from a log; fp16 loss-scale advice."""
    try:
        from trainplan.diagnose.logs import read_log, summarize
        s = summarize(read_log(path, regex))
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if predicted_step_s and s["step_s_median"]:
        s["measured_over_predicted"] = s["step_s_median"] / predicted_step_s
    if as_json:
        typer.echo(json.dumps(s, indent=1))
        return
    for k, v in s.items():
        if k != "advice" and v is not None:
            typer.echo(f"{k:<26}{v:.4g}" if isinstance(v, float) else f"{k:<26}{v}")
    for a in s["advice"]:
        typer.echo(f"advice: {a}")
